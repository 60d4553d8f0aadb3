"""A real Celery worker process on the real broker, against the test database.

Isolation: the worker and this test use their own Redis database (WORKER_TEST_DB, the
pytest-xdist worker's spare one, flushed first) and their own queues (WORKER_TEST_QUEUE,
and WORKER_TEST_BULK_QUEUE for bulk embedding), so neither the development worker nor
other test sessions see these messages, and this worker takes nothing else. The worker
gets the test database's name in its environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings as django_settings
from django.db import connection

from config.celery import app as celery_app
from config.embedded import database_environment
from memories import tasks
from memories.models import EdgeKind, Memory, MemoryEdge
from memories.services import ParticipantSpec, memory_create, memory_edges_refresh_many
from people.services import person_create
from tests.conftest import OWN_DB, broker_url_with_db, suite_redis_db

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

BASE_DIR = Path(__file__).resolve().parents[2]
WORKER_TEST_DB = suite_redis_db(OWN_DB)
WORKER_TEST_QUEUE = "keepsake-worker-test"
WORKER_TEST_BULK_QUEUE = "keepsake-worker-test-bulk"
CLAIM_TIMEOUT = 3  # seconds; short so the claim of the killed worker goes stale quickly


# Generous: the machine is shared, and a loaded 2-core box encodes slowly.
def wait_until(condition: Callable[[], bool], *, what: str, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout:.0f}s waiting for {what}.")
        time.sleep(0.2)


def worker_environment(broker_url: str) -> dict[str, str]:
    environment = dict(os.environ)
    environment.update(
        REDIS_URL=broker_url,
        CELERY_TASK_DEFAULT_QUEUE=WORKER_TEST_QUEUE,
        MEMORY_EMBEDDINGS_BULK_QUEUE=WORKER_TEST_BULK_QUEUE,
        MEMORY_EMBEDDING_CLAIM_TIMEOUT=str(CLAIM_TIMEOUT),
        PYTHONUNBUFFERED="1",
    )
    environment.update(database_environment(connection.settings_dict["NAME"]))
    return environment


class Worker:
    """`celery worker` (prefork, one child) in its own process group, so SIGKILL takes both."""

    def __init__(self, environment: dict[str, str], log_path: Path) -> None:
        self.environment = environment
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-l",
                "info",
                "--concurrency",
                "1",
                "--queues",
                f"{WORKER_TEST_QUEUE},{WORKER_TEST_BULK_QUEUE}",
                "--hostname",
                f"keepsake-worker-test-{os.getpid()}@%h",
                "--without-mingle",
                "--without-gossip",
            ],  # fmt: skip
            cwd=BASE_DIR,
            env=self.environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.process = None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # warm shutdown: the parent finishes its task and stops the child
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()
        self.process = None


@pytest.fixture
def worker_broker(settings) -> Iterator[str]:
    url = broker_url_with_db(django_settings.REDIS_URL, WORKER_TEST_DB)
    client = redis.Redis.from_url(url)
    client.flushdb()
    previous = celery_app.conf.broker_url, celery_app.conf.task_default_queue
    celery_app.conf.broker_url, celery_app.conf.task_default_queue = url, WORKER_TEST_QUEUE
    settings.MEMORY_EMBEDDINGS_BULK_QUEUE = WORKER_TEST_BULK_QUEUE  # read by the router at publish
    yield url
    celery_app.conf.broker_url, celery_app.conf.task_default_queue = previous
    client.flushdb()


@pytest.fixture
def worker(worker_broker) -> Iterator[Worker]:
    with tempfile.TemporaryDirectory() as directory:
        log_path = Path(directory) / "worker.log"
        process = Worker(worker_environment(worker_broker), log_path)
        try:
            yield process
        finally:
            process.stop()
            # Shown by pytest when the test fails: what the worker said.
            print(log_path.read_text()[-5000:])


def all_done(memory_ids: list) -> bool:
    memories = Memory.objects.filter(pk__in=memory_ids)
    return all(
        memory.embedded_at is not None
        and memory.edges_computed_at is not None
        and memory.edges_computed_at >= memory.embedded_at
        for memory in memories
    )


def edge_rows() -> set[tuple]:
    return set(MemoryEdge.objects.values_list("source_id", "target_id", "kind", "weight"))


def test_worker_computes_embeddings_and_edges_and_nothing_is_lost_when_it_dies(
    alice, worker, worker_broker, settings
):
    settings.MEMORY_EMBEDDING_CLAIM_TIMEOUT = CLAIM_TIMEOUT
    bob = person_create(owner=alice, display_name="Bob")
    worker.start()

    dog = memory_create(owner=alice, body="My dog Rex loves chasing the ball in the park")
    fetch = memory_create(owner=alice, body="Rex the dog played fetch with a ball at the park")
    sailing = memory_create(owner=alice, body="Sailing on the lake", participants=[ParticipantSpec(bob)])
    dinner = memory_create(owner=alice, body="Dinner at the harbour", participants=[ParticipantSpec(bob)])
    first = [dog.pk, fetch.pk, sailing.pk, dinner.pk]
    wait_until(lambda: all_done(first), what="the first embeddings and edges")
    assert set(Memory.objects.filter(pk__in=first).values_list("embedding_model", flat=True)) == {
        "all-MiniLM-L6-v2"
    }
    assert MemoryEdge.objects.filter(source=dog, target=fetch, kind=EdgeKind.SIMILAR).exists()
    assert MemoryEdge.objects.filter(source=dinner, target=sailing, kind=EdgeKind.SHARED_PERSON).exists()

    # Give it a backlog, and kill it (parent and child, no goodbye) in the middle.
    backlog = [
        memory_create(
            owner=alice,
            body=f"Day {n} of the walking holiday: hills, rain, a pub lunch and {n} blisters",
            participants=[ParticipantSpec(bob)] if n % 3 == 0 else [],
        ).pk
        for n in range(24)
    ]
    wait_until(
        lambda: Memory.objects.filter(pk__in=backlog, embedded_at__isnull=False).exists(),
        what="the worker to start on the backlog",
    )
    worker.kill()
    embedded_before_kill = Memory.objects.filter(pk__in=backlog, embedded_at__isnull=False).count()
    assert embedded_before_kill < len(backlog), "the worker finished before it could be killed"

    # Saved while no worker runs: queued, waiting for it.
    later = [memory_create(owner=alice, body=f"Postcard {n} from the coast").pk for n in range(5)]
    # Saved while the broker is unreachable too: never queued at all.
    celery_app.conf.broker_url = "redis://127.0.0.1:1/0"
    lost = [memory_create(owner=alice, body=f"Lost note {n} about the garden").pk for n in range(3)]
    celery_app.conf.broker_url = worker_broker
    print(f"Killed with {embedded_before_kill}/{len(backlog)} of the backlog embedded.")

    worker.start()
    time.sleep(CLAIM_TIMEOUT + 1)  # the killed worker's claim goes stale
    settings.MEMORY_SWEEP_GRACE = 0
    assert tasks.sweep() > 0
    everything = first + backlog + later + lost
    last_sweep = time.monotonic()

    def done_else_sweep_like_beat() -> bool:
        # Sweep messages expire unconsumed (MEMORY_SWEEP_INTERVAL * 2); beat would
        # sweep again meanwhile, so do the same while waiting.
        nonlocal last_sweep
        if all_done(everything):
            return True
        if time.monotonic() - last_sweep > 20:
            tasks.sweep()
            last_sweep = time.monotonic()
        return False

    wait_until(done_else_sweep_like_beat, what="the sweep to complete every memory")
    assert not Memory.objects.filter(pk__in=everything, embedding_claimed_at__isnull=False).exists()

    # What the worker computed is exactly what the services compute here.
    worker.stop()
    computed_by_worker = edge_rows()
    memory_edges_refresh_many(memory_ids=everything, invalidate_neighbours=False)
    assert edge_rows() == computed_by_worker
