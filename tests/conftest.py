from __future__ import annotations

import os

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


# Saves publish Celery tasks after commit (in transactional tests). They go to
# their own Redis database, flushed at the start of each session, so they never
# reach the development worker's queue. KEEPSAKE_TEST_BROKER_URL overrides it.
TEST_BROKER_DB = 15


def broker_url_with_db(redis_url: str, db: int) -> str:
    """`redis_url` with its database number replaced by `db`."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(redis_url)._replace(path=f"/{db}"))


@pytest.fixture(scope="session", autouse=True)
def _isolated_test_broker() -> None:
    import redis
    from django.conf import settings as django_settings

    from config.celery import app as celery_app

    url = os.environ.get("KEEPSAKE_TEST_BROKER_URL") or broker_url_with_db(
        django_settings.REDIS_URL, TEST_BROKER_DB
    )
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


@pytest.fixture(autouse=True)
def _fast_passwords(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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
