"""Drive the real HTTP API with concurrent clients and print throughput and latency per endpoint.

Starts the production web server `make run` starts (gunicorn with threads, see
config.embedded.web_command) on a free loopback port, with a local stub language
model (an OpenAI-compatible HTTP server in this process, answering at once), and
N client threads, each with its own keep-alive connection, for a bounded time:

- agent search   GET  /api/v1/memories/search/?q=…   (agent token: the consent gate)
- owner timeline GET  /api/v1/memories/?offset=…     (owner token)
- memory write   POST /api/v1/memories/              (owner token)
- chat           POST /api/v1/agents/<id>/chat/      (agent token, the stub LLM)

The owner `bench_load` is seeded like bench_retrieval's (realistic text, one
person per 1% of memories, a tenth of them withheld), each text embedded by the
real model (--vectors synthetic: random vectors, as bench_retrieval's), and kept
for reuse; the memories the run writes are deleted afterwards. Benchmarks print
figures: nothing here asserts on time.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import subprocess
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection
from django.utils import timezone

from accounts.models import AccessToken, TokenKind
from accounts.services import access_token_create
from agents.models import Agent
from agents.services import agent_create_builtins
from benchmarks.options import require_positive
from benchmarks.seeding import Text, delete_bench_users, seed_one_owner
from benchmarks.timing import load_average, machine, percentile
from config.embedded import free_port, wait_until_serving, web_command, web_threads, web_workers
from memories.models import Memory
from people.models import ConsentStatus, Person

USERNAME = "bench_load"
WRITE_TITLE = "bench_load write"
# How often each client picks each endpoint (a journal is read far more than written).
MIX = (("agent search", 40), ("owner timeline", 30), ("memory write", 15), ("chat", 15))
SERVER_START_TIMEOUT = 120
MIXED_VECTORS_WARNING = (
    "Note: this database holds other benchmarks' synthetic vectors. The model's vectors in the "
    "same vector index cut their recall (bench_retrieval's owner: recall@10 0.999 -> 0.947-0.970); "
    "run bench_load in a database of its own "
    "(KEEPSAKE_DATABASE_NAME=keepsake_load, created and migrated first)."
)


def _database_url() -> str:
    from urllib.parse import quote

    from django.db import connection

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = db["HOST"] or "127.0.0.1"
    if host.startswith("/"):  # a Unix socket directory
        # django-environ passes ?host= on to the driver, which takes a socket directory there.
        return f"postgres://{credentials}@:{db['PORT'] or 5432}/{db['NAME']}?host={host}"
    return f"postgres://{credentials}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


class _StubLLM(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        payload = json.dumps(
            {
                "id": "bench",
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Noted [1]."},
                        "finish_reason": "stop",
                    }
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


class _Client:
    """One simulated user: a keep-alive connection and its own random choices."""

    def __init__(
        self, *, port: int, owner_token: str, agent_token: str, agent_id: str, text: Text, seed: int
    ):
        self.port, self.agent_id, self.text = port, agent_id, text
        self.owner = {"Authorization": f"Bearer {owner_token}", "Content-Type": "application/json"}
        self.agent = {"Authorization": f"Bearer {agent_token}", "Content-Type": "application/json"}
        self.random = random.Random(seed)
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conversation: str | None = None

    def request(self, method: str, path: str, headers: dict, body: dict | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(2):
            try:
                self.connection.request(method, path, body=data, headers=headers)
                response = self.connection.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # The server closed an idle keep-alive connection: reconnect once.
                self.connection.close()
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def one(self, endpoint: str) -> int:
        from urllib.parse import quote

        if endpoint == "agent search":
            return self.request("GET", f"/api/v1/memories/search/?q={quote(self.text.query())}", self.agent)[
                0
            ]
        if endpoint == "owner timeline":
            offset = self.random.randrange(0, 200, 20)
            return self.request("GET", f"/api/v1/memories/?limit=20&offset={offset}", self.owner)[0]
        if endpoint == "memory write":
            title, body = self.text.memory()
            status, _ = self.request(
                "POST", "/api/v1/memories/", self.owner, {"title": WRITE_TITLE, "body": f"{title} {body}"}
            )
            return status
        body = {"message": self.text.query()}
        if self.conversation:
            body["conversation"] = self.conversation
        status, content = self.request("POST", f"/api/v1/agents/{self.agent_id}/chat/", self.agent, body)
        if status == 200 and self.conversation is None:
            self.conversation = json.loads(content).get("conversation")
        return status


class Command(BaseCommand):
    help = "Concurrent clients against the production web server: throughput, p50/p95/p99, errors."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--clients", type=int, default=50)
        parser.add_argument("--seconds", type=float, default=60.0)
        parser.add_argument("--memories", type=int, default=10_000, help="the bench owner's memories")
        parser.add_argument(
            "--think",
            type=float,
            default=0.0,
            help="mean seconds each client pauses between requests (exponential, as a person reading "
            "does); 0, the default: back to back, the server saturated",
        )
        parser.add_argument(
            "--vectors",
            choices=("model", "synthetic"),
            default="model",
            help="model (the default): the owner's memories embedded by the real model, as the "
            "searches' queries are; synthetic: random vectors (fast to seed, but a query's words then "
            "land far from every memory)",
        )
        parser.add_argument(
            "--warmup",
            type=float,
            default=5.0,
            help="seconds of the same load, not measured, before measuring: every web process "
            "(each loads the model and compiles its statements on its first requests) answers warm",
        )
        parser.add_argument("--seed", type=int, default=11)
        parser.add_argument("--clean", action="store_true", help="delete the bench_load user and exit")

    def handle(self, *args, **options) -> None:
        if options["clean"]:
            self.stdout.write(f"Deleted bench data: {delete_bench_users(USERNAME)}")
            return
        require_positive(options, "clients", "seconds", "memories")
        if options["think"] < 0:
            raise CommandError("--think cannot be negative.")
        if options["warmup"] < 0:
            raise CommandError("--warmup cannot be negative.")
        if options["clients"] > 500:
            raise CommandError("--clients is at most 500.")
        self._run(options)

    def _prepare(self, options: dict) -> tuple[str, str, str, Text]:
        text = Text("words", np.random.default_rng(options["seed"] + 1), vectors=options["vectors"])
        synthetic_beside = (
            Memory.objects.filter(embedding_model__startswith="bench-random")
            .exclude(owner__username=USERNAME)
            .exists()
        )
        if options["vectors"] == "model" and synthetic_beside:
            self.stdout.write(MIXED_VECTORS_WARNING)
        _, _, seeded = seed_one_owner(options, username=USERNAME, text=text, out=self.stdout)
        # A tenth of the people withheld, so agent searches go through a gate that refuses.
        Person.objects.filter(pk__in=seeded.bucket_person_ids[:10]).update(
            consent_status=ConsentStatus.PENDING
        )
        with connection.cursor() as cursor:
            # Statistics as autovacuum leaves them (people_person's settings: migration
            # people 0007), as bench_retrieval does after its flips. Planned on the seeding's
            # "every person granted", the gate's participant check read every participant
            # of the table per search (kNN 6 ms instead of 1.6 at 10,000 memories).
            cursor.execute("ANALYZE people_person")
        owner = Person.objects.get(pk=seeded.bucket_person_ids[0]).owner
        agent = Agent.objects.filter(owner=owner).order_by("name").first()
        if agent is None:
            agent = agent_create_builtins(owner=owner)[0]
        # Tokens of earlier runs are revoked: each run makes its own two.
        AccessToken.objects.filter(owner=owner, revoked_at=None).update(revoked_at=timezone.now())
        _, owner_token = access_token_create(owner=owner, kind=TokenKind.OWNER, name="bench_load owner")
        _, agent_token = access_token_create(
            owner=owner, kind=TokenKind.AGENT, agent=agent, name="bench_load"
        )
        return owner_token, agent_token, str(agent.pk), text

    def _start_server(self, port: int, llm_port: int) -> subprocess.Popen:
        env = {
            **os.environ,
            "LLM_BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
            "LLM_API_KEY": "bench",
            # The database this command uses (in a test run, the test database).
            "DATABASE_URL": _database_url(),
        }
        server = subprocess.Popen(
            web_command(f"127.0.0.1:{port}", access_log=False),
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        why = wait_until_serving(port, server, SERVER_START_TIMEOUT)
        if why == "exited":
            raise CommandError(f"The web server exited: {server.stderr.read()[-2000:]}")
        if why == "timeout":
            server.terminate()
            raise CommandError("The web server did not answer within two minutes.")
        return server

    def _run(self, options: dict) -> None:
        owner_token, agent_token, agent_id, text = self._prepare(options)
        llm = ThreadingHTTPServer(("127.0.0.1", 0), _StubLLM)
        threading.Thread(target=llm.serve_forever, daemon=True).start()
        port = free_port()
        self.stdout.write(f"Starting the web server on 127.0.0.1:{port} (gunicorn, as `make run`)…")
        server = self._start_server(port, llm.server_address[1])
        latencies: dict[str, list[float]] = defaultdict(list)
        errors: dict[str, int] = defaultdict(int)
        statuses: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        lock = threading.Lock()
        endpoints = [name for name, _ in MIX]
        weights = [weight for _, weight in MIX]
        try:
            clients = [
                _Client(
                    port=port,
                    owner_token=owner_token,
                    agent_token=agent_token,
                    agent_id=agent_id,
                    text=Text("words", np.random.default_rng(options["seed"] + 100 + index)),
                    seed=options["seed"] + index,
                )
                for index in range(options["clients"])
            ]
            # One request of each kind first: the server loads the embedding model.
            for endpoint in endpoints:
                clients[0].one(endpoint)
            think = options["think"]
            measuring = False
            deadline = 0.0

            def drive(client: _Client) -> None:
                while time.monotonic() < deadline:
                    if think:
                        # Paced like people: the next request after a pause (not measured).
                        time.sleep(
                            min(client.random.expovariate(1 / think), max(0.0, deadline - time.monotonic()))
                        )
                        if time.monotonic() >= deadline:
                            break
                    endpoint = client.random.choices(endpoints, weights)[0]
                    started = time.perf_counter()
                    try:
                        status = client.one(endpoint)
                    except (OSError, http.client.HTTPException):
                        status = 0
                    elapsed = (time.perf_counter() - started) * 1000
                    if not measuring:
                        continue
                    with lock:
                        latencies[endpoint].append(elapsed)
                        statuses[endpoint][status] += 1
                        if not 200 <= status < 300:
                            errors[endpoint] += 1

            def run_all(seconds: float) -> None:
                nonlocal deadline
                deadline = time.monotonic() + seconds
                threads = [threading.Thread(target=drive, args=(client,)) for client in clients]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()

            if options["warmup"]:
                # Every web process warm (gunicorn hands connections to whichever accepts):
                # the same load, not counted.
                run_all(options["warmup"])
            self.stdout.write(f"Load average before measuring: {load_average()}")
            measuring = True
            started = time.monotonic()
            client_cpu = time.process_time()
            run_all(options["seconds"])
            elapsed = time.monotonic() - started
            # The clients (and the stub model) run on the same cores as the server.
            client_cpu = time.process_time() - client_cpu
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
            llm.shutdown()
            close_old_connections()
            Memory.objects.filter(owner__username=USERNAME, title=WRITE_TITLE).delete()
        self._report(options, latencies, errors, statuses, elapsed, client_cpu)

    def _report(self, options, latencies, errors, statuses, elapsed: float, client_cpu: float) -> None:
        total = sum(len(values) for values in latencies.values())
        pacing = (
            f"each pausing {options['think']:g} s on average between requests"
            if options["think"]
            else "back to back"
        )
        self.stdout.write(
            f"\n{options['clients']} clients ({pacing}) for {elapsed:.0f} s, after {options['warmup']:g} s "
            f"unmeasured, against gunicorn ({web_workers()} workers, {web_threads()} threads each) on "
            f"{machine()}; the owner has {options['memories']} memories "
            f"({'embedded by the model' if options['vectors'] == 'model' else 'synthetic vectors'}).\n"
            f"Throughput: {total / elapsed:.1f} requests/s; errors: {sum(errors.values())} of {total}.\n"
        )
        self.stdout.write(
            f"{'endpoint':<16} {'requests':>9} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
            f"{'errors':>7}"
        )
        for endpoint, _ in MIX:
            values = latencies.get(endpoint, [])
            p50, p95, p99 = (percentile(values, percent) for percent in (50, 95, 99))
            self.stdout.write(
                f"{endpoint:<16} {len(values):>9} {len(values) / elapsed:7.1f} "
                f"{p50:8.1f} {p95:8.1f} {p99:8.1f} {errors.get(endpoint, 0):>7}"
            )
        failing = {
            endpoint: dict(codes)
            for endpoint, codes in statuses.items()
            if any(not 200 <= code < 300 for code in codes)
        }
        if failing:
            self.stdout.write(f"Status codes where errors happened (0 = connection error): {failing}")
        self.stdout.write(
            f"The clients themselves used {client_cpu:.1f} CPU-seconds "
            f"({client_cpu / elapsed:.2f} of a core) on the same machine."
        )
        self.stdout.write(f"Load average after measuring: {load_average()}")
