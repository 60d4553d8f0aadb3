"""Benchmark consent flips: how long granting and withholding take, and the agents' index after a bulk revoke.

Seeds (or reuses) one owner the way bench_retrieval does (benchmarks.seeding:
random vectors, one bucket person per 1% of memories, all granted), then adds a
few "flip" people, each in a fixed number of that owner's memories (default 100,
1,000 and 10,000, disjoint). Then:

- For each flip person, rounds of withhold -> VACUUM -> grant -> index task ->
  VACUUM, each consent change made through people.services.person_set_consent,
  the service the web page and the API call, and timed with its commit. The
  VACUUM between measures a grant as it happens in life: the memories' old
  entries have long left the agents' index. One more grant right after a
  withhold (no VACUUM between) shows the case of a quick undo. A grant leaves
  the memories it opens out of the agents' HNSW index; the task
  memories.index_opened_gates puts them in after commit. The bench runs that
  task's work itself, timed apart, after each grant (the grant's own publish
  goes to a broker database of the bench's own, so no running worker races it).
- The bulk revoke: agents' nearest-neighbour p50/p95 and recall@k (against exact
  gated search, in the same state) before, right after withholding the largest
  flip person, after VACUUM, right after granting again (its memories found
  beside the index), after the index task, and after VACUUM.

Prints figures with the load average (tests never assert on time).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from benchmarks.options import require_positive
from benchmarks.searches import exact_ids
from benchmarks.seeding import (
    SeededOwner,
    build_indexes,
    delete_bench_users,
    drop_indexes,
    prewarm,
    query_vectors,
    seed_one_owner,
    unindexed_open_rows,
)
from benchmarks.timing import (
    Measured,
    latency_recall_columns,
    latency_recall_header,
    load_average,
    machine,
    measure,
    server_versions,
)
from memories.gate_index import gate_rows_index_opened
from memories.models import Memory, MemoryParticipant
from people.models import ConsentStatus, Person
from people.services import person_set_consent

BENCH_USERNAME = "bench_consent"
FLIP_NAME = "Bench flip {size}"
GATE_TABLE = "memories_memorygate"
# The grants' task publishes go to this Valkey database, not to the broker a worker
# reads (the bench runs the task's work itself, timed); its queue is emptied at the end.
# (Tests use 12-15.)
BENCH_BROKER_DB = 10


class Command(BaseCommand):
    help = "Measure consent grant/withhold times and the agents' index after a bulk revoke."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memories", type=int, default=100_000, help="memories of the bench owner")
        parser.add_argument(
            "--sizes",
            default="100,1000,10000",
            help="memories each flip person is in; the largest is also the bulk revoke",
        )
        parser.add_argument(
            "--rounds",
            type=int,
            default=3,
            help="withhold/grant rounds per flip person; 0: the bulk revoke only",
        )
        parser.add_argument("--queries", type=int, default=200)
        parser.add_argument("--limit", type=int, default=10, help="k of top-k")
        parser.add_argument(
            "--text",
            choices=["words", "vocabulary"],
            default="vocabulary",
            help="seeded text (bench_retrieval's modes); vocabulary is the fastest to seed",
        )
        parser.add_argument("--distribution", choices=["clustered", "uniform"], default="clustered")
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument(
            "--explain",
            action="store_true",
            help="also print EXPLAIN ANALYZE of one grant (rolled back): where the time goes, per trigger",
        )
        parser.add_argument("--clean", action="store_true", help="delete the bench_consent user and exit")

    def handle(self, *args, **options) -> None:
        if options["clean"]:
            self.stdout.write(f"Deleted bench data: {delete_bench_users(BENCH_USERNAME)}")
            return
        try:
            sizes = sorted({int(part) for part in options["sizes"].split(",") if part.strip()})
        except ValueError:
            raise CommandError("--sizes takes whole numbers like 100,1000,10000.") from None
        if not sizes or min(sizes) <= 0:
            raise CommandError("--sizes must be positive.")
        if options["rounds"] < 0:
            raise CommandError("--rounds must be 0 (the bulk revoke only) or more.")
        require_positive(options, "memories", "queries", "limit")
        if sum(sizes) > options["memories"]:
            raise CommandError(
                "The flip people's memories are disjoint: --sizes must add up to --memories at most."
            )
        with _private_broker():
            self._run(options, sizes)

    def _run(self, options: dict, sizes: list[int]) -> None:
        from memories import retrieval
        from memories.search import vector

        limit = options["limit"]
        rng, _, seeded = seed_one_owner(
            options, username=BENCH_USERNAME, distribution=options["distribution"], out=self.stdout
        )
        owner = get_user_model().objects.get(pk=seeded.user_id)
        flips = _seed_flip_people(seeded, sizes, rng, self.stdout)
        _grant_everyone(seeded, flips)
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM ANALYZE {GATE_TABLE}")
        queries = query_vectors(
            rng=rng, owner_id=seeded.user_id, count=options["queries"], distribution=options["distribution"]
        )
        self.stdout.write(prewarm())
        agent_scope = retrieval.memory_scope(seeded.user_id, respect_consent=True)

        def knn(query):
            with transaction.atomic():
                return [
                    memory_id
                    for memory_id, _ in vector._nearest_neighbours(
                        agent_scope, query, owner_id=seeded.user_id, limit=limit, gated=True
                    )
                ]

        def exact(query):
            return exact_ids(agent_scope, query, limit)

        with connection.cursor() as cursor:
            cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'memory_gate_open_hnsw'")
            (hnsw_options,) = cursor.fetchone()
        self.stdout.write(
            f"\n{seeded.memory_count} memories for {BENCH_USERNAME} ({options['distribution']} vectors, "
            f"text: {options['text']}); {Memory.objects.count()} memories in the table. "
            f"{server_versions()}, {machine()}; "
            f"agents' index {', '.join(hnsw_options or [])}.\n"
            f"Consent changes through person_set_consent, timed with their commit.\n"
            f"Load average before measuring: {load_average()}\n"
        )
        if options["explain"]:
            self.stdout.write(_explain_grant(flips[min(sizes, key=lambda size: abs(size - 1000))], owner))

        self.stdout.write(
            f"{'memories':>9} {'change':<34} {'median s':>9} {'max s':>7} {'memories/s':>11}  rounds (s)"
        )
        for size in sizes if options["rounds"] else []:
            person = flips[size]
            withheld, granted, indexing = [], [], []
            for _ in range(options["rounds"]):
                withheld.append(_timed_consent(person, ConsentStatus.REVOKED, owner))
                _vacuum()
                granted.append(_timed_consent(person, ConsentStatus.GRANTED, owner))
                indexing.append(_timed_indexing(seeded.user_id))
                _vacuum()
            withheld.append(_timed_consent(person, ConsentStatus.REVOKED, owner))
            quick_undo = _timed_consent(person, ConsentStatus.GRANTED, owner)
            undo_indexing = _timed_indexing(seeded.user_id)
            _vacuum()
            self._flip_line(size, "withhold", withheld)
            self._flip_line(size, "grant (old entries vacuumed)", granted)
            self._flip_line(size, "  then the index task", indexing)
            self._flip_line(size, "grant right after withhold", [quick_undo])
            self._flip_line(size, "  then the index task", [undo_indexing])

        largest = flips[sizes[-1]]
        self.stdout.write(
            f"\nBulk revoke: one person in {sizes[-1]} memories, agents' kNN (k={limit}, "
            f"{len(queries)} queries), recall against exact gated search in the same state.\n"
            f"Load average: {load_average()}"
        )
        self.stdout.write(f"{'state':<44} {latency_recall_header(percents=(50, 95))}")
        truth_open = measure(exact, queries)
        self._knn_line("all granted", measure(knn, queries), truth_open, limit)
        seconds = _timed_consent(largest, ConsentStatus.REVOKED, owner)
        # The agents' search first, as it runs right after the revoke; the exact
        # reference after it, with fresh planner statistics: a single consent change
        # never triggers autoanalyze, and with statistics saying everyone has granted
        # the exact gated scan of every memory took minutes per query (a nested loop
        # over the revoked person's participations). The answer does not depend on
        # the plan.
        right_after = measure(knn, queries)
        _analyze_people()
        truth_revoked = measure(exact, queries)
        self._knn_line(f"right after the revoke ({seconds:.2f} s)", right_after, truth_revoked, limit)
        self.stdout.write(f"  {_dead_tuples()}")
        seconds = _vacuum()
        self._knn_line(f"after VACUUM ({seconds:.1f} s)", measure(knn, queries), truth_revoked, limit)
        seconds = _timed_consent(largest, ConsentStatus.GRANTED, owner)
        self._knn_line(
            f"right after granting again ({seconds:.2f} s)", measure(knn, queries), truth_open, limit
        )
        seconds = _timed_indexing(seeded.user_id)
        self._knn_line(f"after the index task ({seconds:.1f} s)", measure(knn, queries), truth_open, limit)
        seconds = _vacuum()
        self._knn_line(f"after VACUUM ({seconds:.1f} s)", measure(knn, queries), truth_open, limit)
        self.stdout.write(
            "(The exact reference after the revoke is computed after ANALYZE of the people and "
            "participant tables, which then apply to the states after it.)"
        )
        self.stdout.write(f"\nLoad average after measuring: {load_average()}")
        self.stdout.write(f"Bench data kept for reuse under user {BENCH_USERNAME}; --clean removes it.")

    def _flip_line(self, size: int, label: str, seconds: list[float]) -> None:
        median = statistics.median(seconds)
        rounds = " ".join(f"{value:.2f}" for value in seconds)
        self.stdout.write(
            f"{size:>9} {label:<34} {median:9.2f} {max(seconds):7.2f} {size / median:11.0f}  {rounds}"
        )

    def _knn_line(self, label: str, measured: Measured, truth: Measured, limit: int) -> None:
        self.stdout.write(f"{label:<44} {latency_recall_columns(measured, truth, limit, percents=(50, 95))}")


def _seed_flip_people(
    seeded: SeededOwner, sizes: list[int], rng: np.random.Generator, out
) -> dict[int, Person]:
    """One granted person per size, in that many of the owner's memories (disjoint); reused when there."""
    names = {FLIP_NAME.format(size=size) for size in sizes}
    existing = {
        person.display_name: person
        for person in Person.objects.filter(owner_id=seeded.user_id, display_name__startswith="Bench flip ")
    }
    reusable = {
        name: person
        for name, person in existing.items()
        if name in names and person.participations.count() == int(name.rsplit(" ", 1)[1])
    }
    if len(reusable) == len(names) and len(existing) == len(names):
        out.write(f"  reusing flip people in {', '.join(str(size) for size in sizes)} memories")
        return {size: reusable[FLIP_NAME.format(size=size)] for size in sizes}
    stale = Person.objects.filter(owner_id=seeded.user_id, display_name__startswith="Bench flip ")
    # Granted before their participant rows go: removing them then changes no gate row.
    stale.update(consent_status=ConsentStatus.GRANTED)
    MemoryParticipant.objects.filter(person__in=stale).delete()
    stale.delete()
    ids = sorted(Memory.objects.filter(owner_id=seeded.user_id).values_list("pk", flat=True))
    picked = rng.permutation(len(ids))
    flips, start = {}, 0
    for size in sizes:
        # Created granted, so adding them to memories leaves every gate row (and the
        # agents' index) as it was.
        person = Person.objects.create(
            owner_id=seeded.user_id,
            display_name=FLIP_NAME.format(size=size),
            consent_status=ConsentStatus.GRANTED,
        )
        MemoryParticipant.objects.bulk_create(
            (
                MemoryParticipant(memory_id=ids[index], person=person)
                for index in picked[start : start + size]
            ),
            batch_size=5_000,
        )
        start += size
        flips[size] = person
    out.write(f"  added flip people in {', '.join(str(size) for size in sizes)} memories")
    return flips


def _grant_everyone(seeded: SeededOwner, flips: dict[int, Person]) -> None:
    """Start from full consent; a bulk change (an interrupted earlier run) rebuilds the agents' index."""
    people = Person.objects.filter(
        pk__in=[*seeded.bucket_person_ids, *(person.pk for person in flips.values())]
    )
    withheld = people.exclude(consent_status=ConsentStatus.GRANTED)
    if not withheld.exists() and not unindexed_open_rows(seeded.user_id):
        return
    definitions = drop_indexes(("memory_gate_open_hnsw",))
    try:
        withheld.update(consent_status=ConsentStatus.GRANTED)
        # What the task would do, while the index is away: one build, not an insert per row.
        gate_rows_index_opened(owner_id=seeded.user_id, batch_size=10_000)
    finally:
        build_indexes(definitions)


@contextmanager
def _private_broker() -> Iterator[None]:
    """Publishes (the grants' index task) go to a Valkey database of the bench's own, emptied after."""
    import redis
    from django.conf import settings

    from config.celery import app

    url = urlunsplit(urlsplit(settings.REDIS_URL)._replace(path=f"/{BENCH_BROKER_DB}"))
    previous = app.conf.broker_url
    app.conf.broker_url = url
    try:
        yield
    finally:
        app.conf.broker_url = previous
        try:
            redis.Redis.from_url(url, socket_connect_timeout=1).delete(settings.MEMORY_EMBEDDINGS_BULK_QUEUE)
        except redis.RedisError:
            pass  # nothing was published there either


def _analyze_people() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE people_person")
        cursor.execute("ANALYZE memories_memoryparticipant")


def _timed_indexing(owner_id: int) -> float:
    """The task memories.index_opened_gates's work for this owner, to the end, timed."""
    started = time.perf_counter()
    gate_rows_index_opened(owner_id=owner_id)
    return time.perf_counter() - started


def _timed_consent(person: Person, status: str, owner) -> float:
    person = Person.objects.get(pk=person.pk)
    started = time.perf_counter()
    event = person_set_consent(person=person, status=status, actor=owner, reason="bench_consent")
    seconds = time.perf_counter() - started
    if event is None:
        raise CommandError(f"{person.display_name} was already {status}: the bench lost track of its state.")
    return seconds


def _vacuum() -> float:
    """What autovacuum does to the gate table: removes dead rows, and their entries from the agents' index."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM {GATE_TABLE}")
    return time.perf_counter() - started


def _dead_tuples() -> str:
    """Dead gate rows against the point where autovacuum would start on the table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute(
            "SELECT s.n_dead_tup, c.reltuples, c.reloptions, "
            "current_setting('autovacuum_vacuum_threshold')::float, "
            "current_setting('autovacuum_vacuum_scale_factor')::float "
            "FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = %s",
            [GATE_TABLE],
        )
        dead, tuples, reloptions, threshold, scale = cursor.fetchone()
    table_options = dict(option.split("=", 1) for option in reloptions or [])
    threshold = float(table_options.get("autovacuum_vacuum_threshold", threshold))
    scale = float(table_options.get("autovacuum_vacuum_scale_factor", scale))
    starts_at = threshold + scale * max(tuples, 0)
    return (
        f"{dead} dead gate rows; autovacuum starts on the gate table at {starts_at:.0f} "
        f"({threshold:.0f} + {scale:g} x {max(tuples, 0):.0f} rows)"
    )


def _explain_grant(person: Person, owner) -> str:
    """EXPLAIN ANALYZE of one grant's UPDATE (after a withhold and VACUUM), rolled back: time per trigger."""
    person = Person.objects.get(pk=person.pk)
    person_set_consent(person=person, status=ConsentStatus.REVOKED, actor=owner, reason="bench_consent")
    _vacuum()
    lines = []
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "EXPLAIN (ANALYZE, BUFFERS, WAL) "
                "UPDATE people_person SET consent_status = 'granted' WHERE id = %s",
                [person.pk],
            )
            lines = [row[0] for row in cursor.fetchall()]
            transaction.set_rollback(True)
    finally:
        person_set_consent(person=person, status=ConsentStatus.GRANTED, actor=owner, reason="bench_consent")
        _vacuum()
    count = person.participations.count()
    return (
        f"EXPLAIN ANALYZE of granting a person in {count} memories (rolled back):\n  "
        + "\n  ".join(lines)
        + "\n"
    )
