from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from config import embedded

hypothesis_settings.register_profile(
    "default", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("DATABASE_URL") and embedded.postgres_address() is None:
        pytest.exit(embedded.NOT_RUNNING_HELP + "\n(`make test` starts it for you.)", returncode=1)
    suite_redis_db(SECOND_OWN_DB)  # too many workers for the Redis databases: say so before any test


# The suite's Valkey databases on the shared server (the development app keeps 0). Each
# pytest-xdist worker has three of its own, so no worker's flush or Celery worker reaches
# another's messages: 15, 14 and 13 for the first worker (and a run without xdist), 12, 11
# and 10 for the second, and so on. One worker runs one test at a time, so its tests take
# its two spare databases in turn, each flushing first.
REDIS_DBS_PER_WORKER = 3
# Saves publish Celery tasks after commit (in transactional tests). They go to the worker's
# broker database, flushed at the start of each session, so they never reach the
# development worker's queue. KEEPSAKE_TEST_BROKER_URL overrides the server and database
# (the first worker's: the others count down from it).
BROKER_DB = 0
# A test's own broker (a real Celery worker's, `make run`'s, one whose queue it reads), and a
# second one for a test that moves publishing from one broker to another.
OWN_DB = 1
SECOND_OWN_DB = 2


def xdist_worker_index() -> int:
    """0 for pytest-xdist's first worker (gw0) and for a run without xdist, 1 for gw1, …"""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))


def suite_redis_db(role: int, *, top: int = 15, lowest: int = 1) -> int:
    """The number of this worker's Redis database for `role` (BROKER_DB, OWN_DB, SECOND_OWN_DB).

    Counted down from `top` (the first worker's broker database), never below `lowest`.
    """
    db = top - REDIS_DBS_PER_WORKER * xdist_worker_index() - role
    if db < lowest:
        raise pytest.UsageError(
            f"The suite's Redis databases run out at {lowest}: at most "
            f"{(top - lowest + 1) // REDIS_DBS_PER_WORKER} pytest-xdist workers (-n) can have "
            f"{REDIS_DBS_PER_WORKER} each (from {top} down)."
        )
    return db


def broker_url_with_db(redis_url: str, db: int) -> str:
    """`redis_url` with its database number replaced by `db`."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(redis_url)._replace(path=f"/{db}"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the longest tests first and the server_alone ones last.

    `make test` hands the tests out in this order (--dist loadgroup, not reordered), one to
    each worker first: the longest then run side by side from the start rather than one
    after another at the end; at the end the other workers are in short tests, which a
    server_alone test waits for.
    """
    if getattr(config, "workerinput", None) is None:
        return
    if config.getvalue("loadgroup"):
        _name_groups(items)

    def place(item: pytest.Item) -> int:
        if item.get_closest_marker("longest"):
            return 0
        return 2 if item.get_closest_marker("server_alone") else 1

    items.sort(key=place)  # stable: otherwise in the order collected


def _name_groups(items: list[pytest.Item]) -> None:
    """Put each xdist_group's name at the end of its tests' ids ("…::test@plans"), which is
    how `--dist loadgroup` sends a group's tests to one worker.

    pytest-xdist 3.8 writes the name into `item._nodeid`, which pytest 9 no longer reads (a
    node's id is `item._id`): every group was silently split across the workers, and
    tests/memories/test_plans.py built its 10,000-memory world on both. Done here, once, for
    the ids that lack it; tests/test_suite_groups.py checks that a grouped test's id has it.
    """
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = sorted(
            {
                str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                for mark in item.iter_markers("xdist_group")
            }
        )
        nodeid = item.nodeid
        if names and "@" not in nodeid.rsplit("]", 1)[-1]:
            item._id = coerce_node_id(f"{nodeid}@{'_'.join(names)}")


# The xdist workers share one PostgreSQL server, and its transaction horizon (the oldest
# transaction still open, in any database) is the server's: a test whose assertions read it
# (marked server_alone; a test in another worker holds its transaction open for its whole
# run, a property test's for minutes) runs while no other worker is inside a test. Every
# test holds a shared lock on the run's lock file through its setup, call and teardown; a
# server_alone test holds it exclusively.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    lock = _run_lock(item.config)
    if lock is None:
        return (yield)
    import fcntl

    fcntl.flock(lock, fcntl.LOCK_EX if item.get_closest_marker("server_alone") else fcntl.LOCK_SH)
    try:
        return (yield)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)


_RUN_LOCK = pytest.StashKey[tuple[int, str]]()


def _run_lock(config: pytest.Config) -> int | None:
    """This xdist run's lock file, open (None without xdist)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    if _RUN_LOCK not in config.stash:
        import tempfile

        path = os.path.join(tempfile.gettempdir(), f"keepsake-tests-{workerinput['testrunuid']}.lock")
        config.stash[_RUN_LOCK] = os.open(path, os.O_RDWR | os.O_CREAT, 0o600), path
    return config.stash[_RUN_LOCK][0]


def pytest_unconfigure(config: pytest.Config) -> None:
    if _RUN_LOCK in config.stash:
        descriptor, path = config.stash[_RUN_LOCK]
        os.close(descriptor)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # a worker still running keeps its open one, alone by then


@pytest.fixture(scope="session", autouse=True)
def _isolated_test_broker() -> None:
    from urllib.parse import urlsplit

    import redis
    from django.conf import settings as django_settings

    from config.celery import app as celery_app

    override = os.environ.get("KEEPSAKE_TEST_BROKER_URL")
    if override:
        top = int(urlsplit(override).path.strip("/") or 0)
        url = broker_url_with_db(override, suite_redis_db(BROKER_DB, top=top, lowest=0))
    else:
        url = broker_url_with_db(django_settings.REDIS_URL, suite_redis_db(BROKER_DB))
    celery_app.conf.broker_url = url
    django_settings.CELERY_BROKER_URL = url
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).flushdb()
    except redis.RedisError:
        pass  # no broker: publishing just logs, which is what saves must survive anyway


@pytest.fixture(autouse=True)
def _fresh_search_hints() -> None:
    """Each test reads the planner's statistics afresh: the search's per-process hints
    (an owner's share of the table, an index's size, an open count; kept a minute
    in production)
    must not carry one test's owners into the next."""
    from memories import retrieval

    retrieval.forget_hints()


@pytest.fixture(autouse=True)
def _sessions_named_by_test(request, monkeypatch) -> None:
    """Each database session a test opens carries its name (libpq reads PGAPPNAME on connect).

    The test's own threads and the processes it starts connect with it too, so a session
    still on the test database at the end (_test_database_released) names the test that
    opened it. The tail of the test's id: the server keeps 63 characters.
    """
    monkeypatch.setenv("PGAPPNAME", request.node.nodeid[-63:])


@pytest.fixture(scope="session", autouse=True)
def _test_database_released(django_db_setup, django_db_blocker):
    """At the end, before the test database is dropped, nothing else is connected to it.

    A search outside any transaction (transactional tests, the browser tests' live
    server) runs its full-text side on a helper thread's own connection
    (memories.search.statements._SideRunner): closed here; copies of open vectors are read on
    another thread's (memories.open_vectors._Reader): waited for. Any other session still on the
    test database (a process a test started and did not stop) would make the drop
    fail; it is named in a warning, so it can be found, and ended. Set up after the
    database (it asks for it), so torn down before it.
    """
    yield
    import warnings

    from django.db import DatabaseError, connection

    from memories import open_vectors
    from memories.search import statements

    statements._SIDE_RUNNER.close()
    open_vectors.settle()  # its reader closes its connection after each read
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, client_port, state, left(query, 100), application_name FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        for pid, client_port, state, query, application in cursor.fetchall():
            warnings.warn(
                f"A session was still on the test database at the end ({state}, last {query!r}, "
                f"application {application!r}), opened by {_process_on_port(client_port)}",
                stacklevel=1,
            )
            try:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            except DatabaseError:  # not ours to end (another role, on a server of its own)
                pass


def _process_on_port(port: int | None) -> str:
    """Which local process holds a TCP connection from `port` (the client side of a session)."""
    import psutil

    for found in psutil.net_connections(kind="tcp"):
        if port is not None and found.laddr and found.laddr.port == port and found.pid:
            try:
                process = psutil.Process(found.pid)
                return f"pid {found.pid} ({' '.join(process.cmdline())[:160]})"
            except psutil.Error:
                return f"pid {found.pid}"
    return "a process not found (gone, or not on this machine)"


@pytest.fixture
def unbounded_index_scans():
    """The HNSW scans without their budgets for this test (tests/index_scans.py says why)."""
    from tests.index_scans import unbounded_index_scans

    with unbounded_index_scans():
        yield


@pytest.fixture
def text_side_threads(monkeypatch) -> list[str]:
    """The name of the thread each hybrid search's full-text side ran in, in order: the
    caller's, or the search helper's ("keepsake-search-side…", memories.search.statements._SideRunner)."""
    import threading

    from memories.search import fulltext

    threads: list[str] = []
    original = fulltext._text_matches

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    monkeypatch.setattr(fulltext, "_text_matches", recorded)
    return threads


@pytest.fixture
def kept_open_vectors(monkeypatch) -> list[tuple[int, bool]]:
    """Agents' exact searches take their candidates from a kept copy of the owner's open vectors
    (memories/open_vectors.py) however few the owner has, read again whenever it is stale, by
    the search that finds none (a server reads it on its reader thread meanwhile: tests of that
    in test_open_vectors.py); each try recorded in order as (owner id, whether the copy answered)."""
    from memories import open_vectors
    from memories.search import knn_open

    monkeypatch.setattr(open_vectors, "MIN_ROWS", 0)
    monkeypatch.setattr(open_vectors, "RELOAD_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(open_vectors, "READ_IN_BACKGROUND", False)
    tries: list[tuple[int, bool]] = []
    original = knn_open._kept_open_neighbours

    def recorded(*args, **kwargs):
        rows = original(*args, **kwargs)
        tries.append((kwargs["owner_id"], rows is not None))
        return rows

    monkeypatch.setattr(knn_open, "_kept_open_neighbours", recorded)
    return tries


@pytest.fixture(scope="session", autouse=True)
def _static_files_listed_once() -> Iterator[None]:
    """Every test client loads the middleware afresh, and WhiteNoise then lists and stats every
    static file of every app (about 240; 50-120 ms). The files do not change during a run, so
    the first listing serves every later client: the same URLs, paths and headers."""
    from whitenoise.middleware import WhiteNoiseMiddleware

    listings: dict[tuple, dict] = {}
    list_files = WhiteNoiseMiddleware.add_files_from_finders

    def listed_once(self) -> None:
        from django.conf import settings

        key = (self.static_prefix, tuple(map(str, settings.STATICFILES_DIRS)), tuple(settings.INSTALLED_APPS))
        if key not in listings:
            before = dict(self.files)
            list_files(self)
            listings[key] = {url: found for url, found in self.files.items() if before.get(url) is not found}
        self.files.update(listings[key])

    WhiteNoiseMiddleware.add_files_from_finders = listed_once
    try:
        yield
    finally:
        WhiteNoiseMiddleware.add_files_from_finders = list_files


@pytest.fixture(autouse=True)
def _fast_passwords(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _media_in_a_temporary_folder(settings, tmp_path_factory) -> None:
    """Files a test writes (people's photos, memories' photos) never reach .data/media, and
    doctor's check for photo files without a row never looks at a developer's own store."""
    settings.MEDIA_ROOT = tmp_path_factory.mktemp("media")


@pytest.fixture(autouse=True)
def _fresh_rate_limits(settings) -> None:
    """Each test counts from zero in the real rate-limit cache (Valkey): keys of its own.

    Every test client calls from 127.0.0.1, so without this the sign-ups and wrong
    tokens of earlier tests (and of other runs sharing the server) would add up.
    """
    import uuid

    settings.RATELIMIT_CACHE_PREFIX = f"rl:test:{uuid.uuid4().hex}:"


@pytest.fixture
def alice(db):
    """Alice owns a journal (signed up: Self person and built-in agents)."""
    from accounts.services import user_signup

    return user_signup(username="alice", password="correct horse battery")


@pytest.fixture
def mallory(db):
    """Mallory has her own account and no access to Alice's data."""
    from accounts.services import user_signup

    return user_signup(username="mallory", password="correct horse battery")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def mallory_client(client, mallory):
    client.force_login(mallory)
    return client
