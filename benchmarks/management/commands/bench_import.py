"""How fast a Day One import becomes fully searchable: parsed, saved, embedded, edges computed.

    python manage.py bench_import [--entries 10000] [--seed 7] [--keep] [--progress 10] [--worker N]

Generates a Day One JSON export of --entries entries (journal-like text on a few dozen
subjects, names in it, some tags), then imports it as the product does: import_start
(parse and validate, the job row), then the import task's import_run, whose batches
queue their embeddings on the bulk queue (embed_bulk), which queue the edges
(compute_edges_bulk) and the neighbours' follow-ups. The tasks run eagerly, in this
process, one after the other (Celery's task_always_eager): the same functions a worker
runs, in the same order, without a broker or a second core. "Fully searchable" is every
imported memory embedded with its edges computed after its embedding.

Prints entries/s for parsing, saving (the import batches without the tasks they queue),
embedding and edges, the total time, a progress line every --progress seconds, and the
load average before and after. The bench user (bench_import) is deleted first and, unless
--keep, afterwards.

--worker N runs the tasks in a real Celery worker instead, as `make run` (N = 1) or
docker-compose (N = 2) starts it: `celery worker --concurrency N --queues
celery,embeddings_bulk`, on a broker database of the bench's own (Valkey database 14 of
the configured server, emptied first). The stages then overlap in N processes, so
each is given as the moment its last memory was done (the rows' own timestamps).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from benchmarks.seeding import _own_self, bench_user, delete_bench_users
from benchmarks.timing import load_average, machine
from config.embedded import database_environment
from memories import embeddings, services
from memories.models import Memory
from portability import services as import_services
from portability.models import ImportJob, ImportStatus

OWNER = "bench_import"
# The tables an import writes, whose rows a run deletes again (vacuumed before the next run).
LEFTOVER_TABLES = (
    "memories_memory",
    "memories_memorygate",
    "memories_memorytext",
    "memories_memoryedge",
    "memories_memoryparticipant",
    "people_person",
)

SUBJECTS = {
    "garden": "tomatoes roses soil compost seedlings weeds watering beans greenhouse harvest",
    "running": "park miles pace legs trail morning race stretching shoes breath",
    "cooking": "soup bread oven recipe garlic onions dinner pasta spices kitchen",
    "work": "meeting project deadline manager report office emails presentation team budget",
    "travel": "train station hotel luggage map museum ticket airport border coast",
    "family": "mother father sister brother cousins birthday lunch house visit photos",
    "health": "doctor appointment sleep headache medicine back walk water tired better",
    "books": "novel chapter author library pages story poems reading ending characters",
    "music": "piano concert guitar song rehearsal band chords practice album melody",
    "weather": "rain snow storm sunshine wind fog cold warm clouds thunder",
    "money": "bills savings rent bank budget taxes salary receipts spending insurance",
    "school": "teacher homework class exam lessons pupils grades parents timetable notebook",
    "friends": "dinner laughs pub evening call messages catch-up drinks stories advice",
    "house": "roof repairs paint boiler windows plumber furniture attic cleaning move",
    "pets": "dog cat vet walk food leash fur toys kennel ball",
    "sea": "beach waves swim sand boat harbour tide gulls shells sailing",
    "city": "streets traffic market café crowd square tram shops bridge noise",
    "mountains": "hike summit snow ridge valley path hut boots clouds view",
    "cinema": "film director actors trailer popcorn screen plot scene ending subtitles",
    "sport": "match goal team referee score league stadium fans training coach",
    "faith": "church prayer service choir candles quiet sermon hymn bells community",
    "art": "painting gallery sketch colours canvas brushes exhibition portrait ink frame",
    "baby": "nappies feeding crying smile sleepless nursery pram first steps teeth",
    "car": "engine garage tyres mechanic fuel motorway parking service brakes insurance",
    "grief": "funeral memories loss flowers letters tears grave missing silence photos",
    "learning": "language course vocabulary grammar practice lesson tutor progress mistakes",
    "neighbours": "fence street party noise parcel garden hedge chat doorstep kids",
    "holidays": "christmas presents tree turkey snow cards decorations fireworks wrapping carols",
}
NAMES = ["Anna", "Ben", "Chloé", "David", "Emma", "Farid", "Grace", "Hugo", "Inès", "Jonas", "Kate", "Liam"]
OPENINGS = [
    "Today I spent the morning on {a} and {b}.",
    "A long day: {a}, then {b}, and finally some {c}.",
    "I keep thinking about the {a} and the {b}.",
    "With {name} we talked about {a} for hours.",
    "{name} called about the {a}; we agreed to sort out the {b} next week.",
    "Not much to say: {a}, {b}, {c}.",
]
FOLLOW_UPS = [
    "The {a} was better than I expected.",
    "I should write down more about the {a}.",
    "Later {name} came by and we looked at the {b} together.",
    "Tired but happy about the {c}.",
    "Worried about the {a}, if I am honest.",
    "Tomorrow: {b} and maybe {c}.",
]


def dayone_export(*, entries: int, seed: int) -> bytes:
    """A Day One JSON export: `entries` entries with titles, a few sentences, names and some tags."""
    rng = np.random.default_rng(seed)
    subjects = list(SUBJECTS)
    start = datetime(2012, 1, 1, 7, 0, tzinfo=UTC)
    rows = []
    for index in range(entries):
        subject = subjects[int(rng.integers(len(subjects)))]
        words = SUBJECTS[subject].split()

        def fill(template: str, words=words) -> str:
            a, b, c = (str(word) for word in rng.choice(words, size=3, replace=False))
            return template.format(a=a, b=b, c=c, name=NAMES[int(rng.integers(len(NAMES)))])

        sentences = [fill(OPENINGS[int(rng.integers(len(OPENINGS)))])]
        sentences += [fill(FOLLOW_UPS[int(rng.integers(len(FOLLOW_UPS)))]) for _ in range(rng.integers(1, 5))]
        tags = [subject]
        if rng.random() < 0.2:
            tags.append(NAMES[int(rng.integers(len(NAMES)))])  # people tags, as Day One users keep them
        if rng.random() < 0.1:
            tags.append("event")  # a tag naming a kind sets it
        when = start + timedelta(hours=int(index * 11 + rng.integers(0, 10)))
        rows.append(
            {
                "uuid": f"{index:032X}",
                "creationDate": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "text": f"# {subject.capitalize()}, {when:%d %B}\n\n" + " ".join(sentences),
                "tags": tags,
                "starred": False,
                "timeZone": "Europe/Paris",
            }
        )
    return json.dumps({"metadata": {"version": "1.0"}, "entries": rows}).encode()


class _Timed:
    """A service the tasks call, timed: total seconds, calls and memories handled."""

    def __init__(self, function: Callable, count: Callable[[dict, object], int]) -> None:
        self.function, self.count = function, count
        self.seconds = 0.0
        self.memories = 0

    def __call__(self, **kwargs):
        started = time.perf_counter()
        result = self.function(**kwargs)
        self.seconds += time.perf_counter() - started
        self.memories += self.count(kwargs, result)
        return result


def searchable_counts(owner_id: int) -> dict[str, int]:
    """The owner's memories: how many, how many embedded, how many with edges computed since."""
    return Memory.objects.filter(owner_id=owner_id).aggregate(
        total=Count("pk"),
        embedded=Count("pk", filter=Q(embedded_at__isnull=False)),
        searchable=Count("pk", filter=Q(embedded_at__isnull=False, edges_computed_at__gte=F("embedded_at"))),
    )


class Command(BaseCommand):
    help = (
        "Import a generated N-entry Day One file as the product does (tasks run eagerly in this "
        "process) and print entries/s for parsing, saving, embedding and edges, and the time until "
        "every memory is searchable (embedded, edges computed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--entries", type=int, default=10_000)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines")
        parser.add_argument("--keep", action="store_true", help="keep the bench user and its memories")
        parser.add_argument(
            "--worker",
            type=int,
            default=0,
            metavar="N",
            help="run the tasks in a real Celery worker of N processes (0: eagerly in this process)",
        )
        parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait with --worker")
        parser.add_argument(
            "--broker", help="with --worker: the broker (emptied first); default: Valkey database 14"
        )

    def handle(
        self, *args, entries: int, seed: int, progress: float, keep: bool, worker: int, **options
    ) -> None:
        if worker < 0:
            raise CommandError("--worker takes a number of processes (0: eagerly in this process).")
        delete_bench_users(OWNER)
        self._vacuum_leftovers()
        owner = bench_user(OWNER)
        _own_self(owner)
        content = dayone_export(entries=entries, seed=seed)
        if worker:
            broker = options["broker"] or bench_broker_url(settings.CELERY_BROKER_URL)
            self._with_worker(owner, content, entries, worker, progress, options["timeout"], broker)
        else:
            self._eagerly(owner, content, entries, progress)
        if not keep:
            delete_bench_users(OWNER)

    def _vacuum_leftovers(self) -> None:
        """Clear the rows an earlier run deleted (at its end, or just now) before the clock starts.

        Otherwise autovacuum may come for them during the import and take a core from it (the
        vector index's clean-up walks the graph). A rerun started right after a run, without
        this, measured 194 s against the first run's 168 s at a higher load (2026-11-29, a fresh
        clone); with it, two runs in a row measured 167.0 and 167.6 s. A new user's import on a
        server does not wait for someone else's deletion to be cleaned up."""
        started = time.perf_counter()
        with connection.cursor() as cursor:
            for table in LEFTOVER_TABLES:
                cursor.execute(f"VACUUM (ANALYZE, INDEX_CLEANUP ON) {table}")
        self.stdout.write(
            f"vacuumed what earlier runs deleted in {time.perf_counter() - started:.1f}s (before the clock)"
        )

    def _eagerly(self, owner, content: bytes, entries: int, progress: float) -> None:
        from config.celery import app

        started = time.perf_counter()
        encoder = embeddings._load_model()
        encoder.encode(["warm-up"])  # the model load is not part of the import
        self.stdout.write(
            f"bench_import: {entries} Day One entries ({len(content) / 1024:.0f} KB); tasks run eagerly "
            f"in this process (task_always_eager: the worker's functions, one at a time, no broker); "
            f"model {embeddings.describe(encoder)}, {encoder.threads} thread(s), loaded in "
            f"{time.perf_counter() - started:.1f}s; {machine()}; load {load_average()}"
        )
        embed = _Timed(services.memory_embed_batch, lambda kwargs, stored: len(stored))
        edges = _Timed(services.memory_edges_refresh_many, lambda kwargs, _: len(set(kwargs["memory_ids"])))
        # import_start queues the import task, which (eager) runs at once, inside it.
        run = _Timed(import_services.import_run, lambda kwargs, _: 0)
        was_eager, was_propagating = app.conf.task_always_eager, app.conf.task_eager_propagates
        app.conf.task_always_eager, app.conf.task_eager_propagates = True, True
        services.memory_embed_batch, services.memory_edges_refresh_many = embed, edges
        import_services.import_run = run
        stop = threading.Event()
        reporter = threading.Thread(
            target=self._report, args=(owner.pk, entries, progress, stop), daemon=True
        )
        try:
            reporter.start()
            started = time.perf_counter()
            job = import_services.import_start(owner=owner, filename="dayone-bench.json", content=content)
            # Only if the task could not run (it did, inside import_start, when published).
            while import_services.import_run(job_id=job.pk):
                pass
            done = time.perf_counter()
        finally:
            stop.set()
            services.memory_embed_batch, services.memory_edges_refresh_many = embed.function, edges.function
            import_services.import_run = run.function
            app.conf.task_always_eager, app.conf.task_eager_propagates = was_eager, was_propagating
        if reporter.is_alive():
            reporter.join()
        job = ImportJob.objects.get(pk=job.pk)
        counts = searchable_counts(owner.pk)
        total = done - started
        parsing = total - run.seconds
        saving = run.seconds - embed.seconds - edges.seconds

        def rate(seconds: float) -> str:
            return f"{entries / seconds:8.0f} entries/s ({seconds:6.1f}s)" if seconds > 0 else "n/a"

        self._summary(
            job,
            counts,
            entries,
            total,
            [
                f"  parsing:   {rate(parsing)}  [import_start: read, validate, the job row]",
                f"  saving:    {rate(saving)}  [the import batches: memory_create per entry]",
                f"  embedding: {rate(embed.seconds)}  [{embed.memories} memories embedded]",
                f"  edges:     {rate(edges.seconds)}  [{edges.memories} edge lists computed, "
                f"{edges.memories - counts['total']} of them neighbours' follow-ups]",
            ],
        )

    def _with_worker(
        self,
        owner,
        content: bytes,
        entries: int,
        processes: int,
        progress: float,
        timeout: float,
        broker: str,
    ) -> None:
        import redis

        from config.celery import app

        redis.Redis.from_url(broker).flushdb()  # the bench's own database: nothing queued from before
        process = start_worker(broker, processes)
        was_broker = app.conf.broker_url
        try:
            app.conf.broker_url = broker
            wait_for_worker(broker, process)
            self.stdout.write(
                f"bench_import: {entries} Day One entries ({len(content) / 1024:.0f} KB); a Celery worker of "
                f"{processes} process(es) on queues celery,embeddings_bulk (broker {broker}); "
                f"{machine()}; load {load_average()}"
            )
            self.stdout.flush()
            started, began = time.perf_counter(), timezone.now()
            job = import_services.import_start(owner=owner, filename="dayone-bench.json", content=content)
            next_line = started + progress
            while True:
                time.sleep(0.5)
                counts = searchable_counts(owner.pk)
                now = time.perf_counter()
                if counts["searchable"] == entries or now - started > timeout:
                    break
                if now >= next_line:
                    next_line += progress
                    self.stdout.write(
                        f"  {now - started:6.0f}s: {counts['total']} of {entries} saved, "
                        f"{counts['embedded']} embedded, {counts['searchable']} with edges; "
                        f"load {load_average()}"
                    )
                    self.stdout.flush()
            total = time.perf_counter() - started
        finally:
            app.conf.broker_url = was_broker
            stop_worker(process)
        job = ImportJob.objects.get(pk=job.pk)
        last = Memory.objects.filter(owner=owner).aggregate(
            saved=Max("created_at"), embedded=Max("embedded_at"), edges=Max("edges_computed_at")
        )

        def at(moment) -> str:
            if moment is None:
                return "n/a"
            seconds = (moment - began).total_seconds()
            return f"{seconds:6.1f}s ({entries / seconds:4.0f} entries/s)"

        self._summary(
            job,
            counts,
            entries,
            total,
            [
                f"  last saved:      {at(last['saved'])}",
                f"  last embedded:   {at(last['embedded'])}",
                f"  last edges:      {at(last['edges'])}",
            ],
        )

    def _summary(self, job, counts: dict, entries: int, total: float, stages: list[str]) -> None:
        self.stdout.write(
            f"import: {job.get_status_display()}, {job.imported} imported, {job.skipped_count} skipped"
        )
        for line in stages:
            self.stdout.write(line)
        self.stdout.write(
            f"fully searchable: {counts['searchable']} of {counts['total']} memories "
            f"({counts['embedded']} embedded) in {total:.1f}s = {entries / total:.0f} entries/s overall; "
            f"goal <= 180s: {'met' if total <= 180 and counts['searchable'] == entries else 'NOT met'}"
        )
        self.stdout.write(f"load after: {load_average()}")
        if job.status != ImportStatus.DONE or counts["searchable"] != entries:
            self.stderr.write("Not every entry became searchable: see the counts above.")

    def _report(self, owner_id: int, entries: int, every: float, stop: threading.Event) -> None:
        started = time.perf_counter()
        try:
            while not stop.wait(every):
                counts = searchable_counts(owner_id)
                self.stdout.write(
                    f"  {time.perf_counter() - started:6.0f}s: {counts['total']} of {entries} saved, "
                    f"{counts['embedded']} embedded, {counts['searchable']} with edges; load {load_average()}"
                )
        finally:
            connection.close()  # this thread's own connection


def bench_broker_url(url: str) -> str:
    """The configured Valkey server, database 14: the bench's own broker."""
    return urlunsplit(urlsplit(url)._replace(path="/14"))


def start_worker(broker: str, processes: int) -> subprocess.Popen:
    """`celery worker` as make run and docker-compose start it, in its own process group."""
    environment = {
        **os.environ,
        "REDIS_URL": broker,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        # The database this process uses (a test's, or the one KEEPSAKE_DATABASE_NAME names).
        **database_environment(connection.settings_dict["NAME"]),
    }
    log_level = os.environ.get("BENCH_WORKER_LOG", "warning")  # info: every task's time
    return subprocess.Popen(
        [
            sys.executable, "-m", "celery", "-A", "config", "worker", "-l", log_level,
            "--concurrency", str(processes), "--queues", "celery,embeddings_bulk",
        ],
        cwd=settings.BASE_DIR,
        env=environment,
        start_new_session=True,
    )  # fmt: skip


def wait_for_worker(broker: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Until the worker answers a ping on `broker`. Asked by an app of its own: the project's
    app may hold a connection pool open on the configured broker, and its control messages
    would go there, whatever broker_url says now."""
    from celery import Celery

    probe = Celery("bench_import_probe", broker=broker, set_as_current=False)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError(f"The worker exited ({process.returncode}) before it answered.")
            if probe.control.ping(timeout=1.0):
                return
    finally:
        probe.close()
    stop_worker(process)
    raise CommandError("The worker did not answer within two minutes.")


def stop_worker(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)  # warm shutdown: the parent lets its children finish
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
