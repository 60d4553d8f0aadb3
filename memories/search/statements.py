"""How a search's statements reach PostgreSQL: its transaction, prepared statements, the side runner.

- _search_transaction: a search's transaction, planned without parallel workers; outermost,
  on a connection that can pipeline, its BEGIN, setting and COMMIT travel with its
  statements (_SearchSettings).
- _fetch_prepared: a read-only statement prepared on the connection, its rows in binary.
- _SideRunner (_SIDE_RUNNER): the helper thread that runs a hybrid search's full-text side
  on a connection of its own while the caller runs the vector side.
- _set_hnsw: the HNSW scan's settings (SET LOCAL ef_search, the iterative scan and its bounds).

Machinery only: every statement sent through here was written by the engine around the
gate's compiled SQL (memories/gate.py), and nothing here chooses which rows pass.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import psycopg
from django.conf import settings as django_settings
from django.db import DatabaseError, connection, connections, transaction

from memories.search import hints, settings

logger = logging.getLogger(__name__)

_NO_PARALLEL_WORKERS = "set_config('max_parallel_workers_per_gather', '0', true)"
# The same for a whole session: the search helper's connection (_prepare_side_connection).
_NO_PARALLEL_WORKERS_SESSION = "set_config('max_parallel_workers_per_gather', '0', false)"


class _SearchSettings:
    """A search's transaction: its own setting, and statements held back to go with the next one.

    Outermost (no caller's transaction around it) on a connection that can pipeline
    (psycopg's pipeline mode; not behind a pooler: DATABASE_PREPARED_STATEMENTS), the
    transaction is this module's own: BEGIN and the setting wait (`queued`) and go to
    the server with the search's first statement, in one round trip; _set_hnsw's
    statement waits the same way and goes with the index statement it prepares; and
    _load's statement takes the COMMIT with it (`commit_with_next`). An agent's hybrid
    search then costs two round trips on its connection where it cost five (BEGIN, the
    settings, the index statement, loading, COMMIT: ~0.2-0.5 ms each on this machine).
    Nothing is read from a held-back statement before it has run: its result waits in
    its cursor (_set_hnsw's backlog probe is read after the index statement).

    Otherwise (a caller's transaction around it — tests' `db` fixture, a caller's
    `atomic` — or no pipelining) Django's atomic as before: the setting is sent before
    the first statement, or taken into _set_hnsw's own (take()). Either way an
    execute wrapper of the search's statements.
    """

    def __init__(self) -> None:
        # Whether this transaction is the thread's outermost: no caller's transaction around it.
        self.outermost = not connection.in_atomic_block
        self.pipelined = self.outermost and _can_pipeline()
        self.pending = not self.pipelined
        # Pipelined: statements (sql, params, cursor, answer wanted) sent before the next one,
        # in its round trip.
        self.queued: list[tuple[str, list | None, object, bool]] = []
        self.commit_next = False
        self.begun = False
        # Search transactions inside this one (the same transaction: see _search_transaction).
        self.depth = 0
        self.sent = False
        self.committed = False
        self._sending = False

    def take(self) -> str | None:
        if not self.pending:
            return None
        self.pending = False
        return _NO_PARALLEL_WORKERS

    def hold(self, sql: str, params: list | None = None, *, answer: bool = False):
        """Pipelined: queue `sql` for the next statement's round trip. With `answer`, its cursor,
        whose rows are there once that statement has run (or after flush()); else closed then."""
        cursor = connection.cursor()
        self.queued.append((sql, params, cursor, answer))
        return cursor

    def begin(self) -> None:
        """Pipelined: BEGIN and the setting, held back for the first statement."""
        self.begun = True
        self.hold("BEGIN")
        self.hold(f"SELECT {_NO_PARALLEL_WORKERS}")

    def commit_with_next(self) -> None:
        """Pipelined: the next statement is the transaction's last; COMMIT goes right after it."""
        if self.pipelined and self.begun and not self.committed and not self.depth:
            self.commit_next = True

    def send(self, statement: Callable[[], object] | None = None) -> object:
        """Pipelined: the held-back statements, then `statement`, then COMMIT if asked, in one round trip."""
        queued, self.queued = self.queued, []
        commit, self.commit_next = self.commit_next, False
        raw = connection.connection
        self.sent = True
        self._sending = True
        try:
            with connection.wrap_database_errors, raw.pipeline():
                for sql, params, cursor, _ in queued:
                    cursor.execute(sql, params)
                result = statement() if statement is not None else None
                if commit:
                    raw.execute("COMMIT")
        finally:
            self._sending = False
            for _, _, cursor, answer in queued:
                if not answer:
                    cursor.close()
        if commit:
            self.committed = True
        return result

    def flush(self) -> None:
        if self.queued:
            self.send()

    def end(self, *, failed: bool) -> None:
        """Pipelined: end the transaction: COMMIT (with what is still held back), or ROLLBACK when
        `failed` or when that fails. Nothing when nothing was sent, or COMMIT went already."""
        if not self.sent or self.committed:
            self._forget()
            return
        if not failed:
            try:
                self.commit_next = True
                self.send()
                return
            except BaseException:
                self._rollback()
                raise
        self._rollback()

    def _forget(self) -> None:
        for _, _, cursor, _ in self.queued:
            cursor.close()
        self.queued.clear()

    def _rollback(self) -> None:
        self._forget()
        self.commit_next = False
        raw = connection.connection
        if raw is not None and not raw.closed:
            with connection.wrap_database_errors:
                raw.rollback()  # psycopg's: also forgets what was prepared in the transaction

    def __call__(self, execute, sql, params, many, context):
        if self.pipelined:
            if self._sending or not (self.queued or self.commit_next):
                return execute(sql, params, many, context)
            return self.send(lambda: execute(sql, params, many, context))
        if self.pending:
            self.pending = False
            with context["connection"].cursor() as cursor:
                cursor.execute(f"SELECT {_NO_PARALLEL_WORKERS}")
        return execute(sql, params, many, context)


def _can_pipeline() -> bool:
    """Whether this connection sends a search's statements together (_SearchSettings): in autocommit
    (nothing of Django's open on it), able to pipeline, and prepared statements on (not behind a
    pooler in transaction mode, where statements sent together are best kept apart)."""
    if not getattr(django_settings, "SEARCH_PIPELINE", True):
        return False
    connection.ensure_connection()
    raw = connection.connection
    return (
        connection.get_autocommit()
        and raw.prepare_threshold is not None
        and raw.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        and psycopg.Pipeline.is_supported()
    )


# The innermost search transaction's settings on this thread (see _set_hnsw).
_SEARCH_SETTINGS = threading.local()


@contextlib.contextmanager
def _search_transaction():
    """A search's transaction, planned without parallel workers (SET LOCAL: this transaction only).

    A search's statements each read a few thousand rows at most, and on this
    scale starting a parallel worker costs more than it saves: with a circle of
    ~2,000 open shares the planner sent the exact ranking to a worker (Gather
    Merge: 4.3 of the statement's 5.2 ms) and circle search measured p50 15.1 /
    p95 17.4 ms against 10.3 / 14.5 without; agents' search at 90% gated 17.5
    / 21.5 against 14.8 / 18.5. Not the benchmarks' exact references, which
    scan everything and keep the server's setting. The setting goes with the
    first statement of the transaction, and outermost the transaction's BEGIN and
    COMMIT go with its first and last statements (_SearchSettings).
    """
    outer = getattr(_SEARCH_SETTINGS, "current", None)
    if outer is not None and outer.pipelined and outer.begun and not outer.committed:
        # Inside a pipelined search transaction: the same transaction (Django's atomic would
        # find none of its own here). Its COMMIT stays the outer one's to send.
        outer.depth += 1
        try:
            yield
        finally:
            outer.depth -= 1
        return
    settings_ = _SearchSettings()
    if not settings_.pipelined:
        with transaction.atomic(), connection.execute_wrapper(settings_):
            _SEARCH_SETTINGS.current = settings_
            try:
                yield
            finally:
                _SEARCH_SETTINGS.current = outer
        return
    settings_.begin()
    with connection.execute_wrapper(settings_):
        _SEARCH_SETTINGS.current = settings_
        try:
            yield
        except BaseException:
            settings_.end(failed=True)
            raise
        else:
            settings_.end(failed=False)
        finally:
            _SEARCH_SETTINGS.current = outer


class _SideRunner:
    """One helper thread per process that runs a search's second side on its own connection.

    A hybrid search's vector side and full-text side are independent statements,
    each through the gate: the calling thread runs the vector side while this
    thread runs the full-text one (the same statement, with the same compiled gate,
    as the caller would run; one statement, so in autocommit: no transaction of its
    own), and the search waits for the slower of the two rather than their sum.
    Every memory either side names is loaded through the gate again in the caller's
    transaction (_load), so nothing the gate refuses there is returned, whichever
    snapshot each side read (read committed: each statement has its own anyway).

    Not used (the side runs in the calling thread, as before) when:
    - settings.SEARCH_SIDES_IN_PARALLEL is off (KEEPSAKE_SEARCH_PARALLEL; off by
      default on one core);
    - the caller's connection is not to the database the settings name (a bench
      that points the default alias elsewhere: the helper's would not follow);
    - the caller is inside a transaction: rows it wrote and has not committed are
      visible on its own connection only;
    - the helper is busy with another thread's search (a web process serves several
      at once): waiting for it would cost more than running the side here.
    If the helper's connection fails (the server restarted), the side is run again
    in the calling thread and the helper reconnects for the next search.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Lock()
        self._executor = None
        self._pid = None

    def _pool(self):
        with self._lock:
            # Per process: a thread does not survive a fork (gunicorn's workers).
            if self._executor is None or self._pid != os.getpid():
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="keepsake-search-side")
                self._idle = threading.Lock()
                self._pid = os.getpid()
            return self._executor

    def start(self, side: Callable[[], object]) -> Callable[[], object]:
        """Begin `side` (a function running a search's statements) on the helper; a function waiting for it.

        On the helper `side` runs in autocommit on the helper's connection
        (_prepare_side_connection); when the helper is not used the function
        returned is `side` itself, to be run in the caller's search transaction.
        """
        search = getattr(_SEARCH_SETTINGS, "current", None)
        if (
            not getattr(django_settings, "SEARCH_SIDES_IN_PARALLEL", False)
            or search is None
            or not search.outermost
        ):
            return side
        if not _on_the_configured_database():
            return side
        pool = self._pool()
        idle = self._idle
        if not idle.acquire(blocking=False):
            return side

        def run():
            try:
                _prepare_side_connection()
                return side()
            except Exception:
                # Whatever failed, this thread's connection starts afresh next time.
                connection.close()
                raise
            finally:
                idle.release()

        try:
            future = pool.submit(run)
        except RuntimeError:  # shutting down
            idle.release()
            return side

        def result():
            try:
                return future.result()
            except DatabaseError:
                logger.warning(
                    "Search side failed on the helper's connection; running it here.", exc_info=True
                )
                return side()

        return result

    def close(self) -> None:
        """Close the helper thread's connection (tests: before the test database is dropped)."""
        if self._executor is None:
            return
        # Looked up in the helper thread: `connection` is each thread's own.
        self._executor.submit(lambda: connection.close()).result()


_SIDE_RUNNER = _SideRunner()


def _on_the_configured_database() -> bool:
    """Whether this thread's connection goes where the helper's would: the database the settings name."""
    configured = connections.settings[connection.alias]
    mine = connection.settings_dict
    return all(mine.get(key) == configured.get(key) for key in ("NAME", "HOST", "PORT", "USER"))


# The helper thread's connection, once set up (_prepare_side_connection).
_SIDE_CONNECTION = threading.local()


def _prepare_side_connection() -> None:
    """The helper's connection: searches only, so their setting is the session's, set once.

    A side is one read-only statement: run in autocommit, it needs no transaction of
    its own (BEGIN and COMMIT: two round trips of ~0.15 ms), and no parallel workers
    for the session (_search_transaction's setting, made once per connection).
    """
    connection.ensure_connection()
    raw = connection.connection
    if getattr(_SIDE_CONNECTION, "raw", None) is not raw:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {_NO_PARALLEL_WORKERS_SESSION}")
        _SIDE_CONNECTION.raw = raw


class _SearchCursor(psycopg.Cursor):
    """A psycopg cursor (server-side binding) whose statements come back in binary, prepared or not."""

    prepare_statements = True

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=self.prepare_statements, binary=True)


class _UnpreparedSearchCursor(_SearchCursor):
    prepare_statements = False


def _fetch_prepared(sql: str, params: Sequence, *, prepared: bool = True) -> list[tuple]:
    """Run a read-only statement as a prepared statement of this connection; its rows.

    PostgreSQL then plans it once per connection (a generic plan after its first
    few executions) instead of on every search: for statements whose plan does
    not depend on the values (loading ten ids through the gate), planning the
    circle's gate cost ~1.1 ms of a ~1.5 ms statement. `prepared=False`:
    statements whose best plan depends on the values, planned each time.

    The rows come back in binary: parsing them in text (a timestamp from its ISO
    form, a uuid from its hex) cost ~0.7 ms of a ten-result search's ~3 ms load.
    The cursor is psycopg's (server-side binding) on the same connection and
    transaction as the ORM, wrapped as Django wraps its own, so execute wrappers
    see it. Where prepared statements are off (settings:
    DATABASE_PREPARED_STATEMENTS: behind a pooler that cannot keep them), or
    queries are being logged (DEBUG, a test capturing them: Django's log reads
    the SQL back from a client-side cursor, and would hold None for this one), an
    ordinary cursor runs it, unprepared, in text.
    """
    connection.ensure_connection()
    if connection.connection.prepare_threshold is None or connection.queries_logged:
        cursor = connection.cursor()
    else:
        kind = _SearchCursor if prepared else _UnpreparedSearchCursor
        cursor = connection._prepare_cursor(kind(connection.connection))
    with cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _set_hnsw(
    *,
    ef_search: int,
    max_scan_tuples: int,
    backlog_of: int | None = None,
    sort: bool = True,
    generic: bool = False,
) -> Callable[[], bool | None]:
    """SET LOCAL the HNSW scan's settings (ANN_SCAN_MEM_MULTIPLIER too); with `backlog_of` (an
    owner id), also ask whether that owner has open rows waiting for the agents' index
    (_open_hint's probe). Returns a function that gives that answer (None when not asked):
    read it after the index statement.

    sort=False also turns the planner's sorts off (enable_sort) until _settings_back():
    for an index statement whose planner would otherwise read and sort every row the
    index could have walked to (see knn_open._open_index_neighbours).

    generic=True has the prepared statements that follow run on the connection's generic
    plan (plan_cache_mode force_generic_plan) until _settings_back(): for an index
    statement prepared because its plan is the same whatever the values, which
    PostgreSQL nonetheless went on planning anew at every execution (its custom plans
    looked cheaper to it): the circle's index statement, ~2.2 ms of planning, through the
    circle's gate, for ~2.7 ms of execution (circles._circle_neighbours).

    One statement for the settings (each costs ~0.2 ms on its own), the search
    transaction's own when this is its first statement (_SearchSettings), and the
    probe when _open_hint left it to the scan (a statement less for a big owner's search).
    In a pipelined search transaction the statement is held back and goes to the server
    with the next one, the index statement, in its round trip (_SearchSettings.hold).
    """
    search_settings = getattr(_SEARCH_SETTINGS, "current", None)
    first = search_settings.take() if search_settings is not None else None
    probe = f"EXISTS ({hints._BACKLOG_PROBE})" if backlog_of is not None else "NULL"
    sql = (
        f"SELECT {probe}, set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', %s, true), "
        "set_config('hnsw.scan_mem_multiplier', %s, true)"
        + ("" if sort else ", set_config('enable_sort', 'off', true)")
        + (", set_config('plan_cache_mode', 'force_generic_plan', true)" if generic else "")
        + (f", {first}" if first else "")
    )
    params = [
        *([backlog_of] if backlog_of is not None else []),
        str(ef_search),
        str(max_scan_tuples),
        str(settings.ANN_SCAN_MEM_MULTIPLIER),
    ]
    if search_settings is not None and search_settings.pipelined and not search_settings.committed:
        cursor = search_settings.hold(sql, params, answer=backlog_of is not None)
        if backlog_of is None:
            return lambda: None

        def answer() -> bool | None:
            search_settings.flush()  # if nothing has gone since (it went with the next statement)
            with cursor:
                return cursor.fetchone()[0]

        return answer
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchone()[0]
    return lambda: found


def _settings_back(*names: str) -> None:
    """Undo _set_hnsw(sort=False) ("enable_sort") or _set_hnsw(generic=True) ("plan_cache_mode")
    for the rest of the search's transaction (its other statements, and a caller's transaction
    around it): RESET, the server's own value. Pipelined, it goes with the next statement (or
    the COMMIT) at no round trip of its own."""
    search_settings = getattr(_SEARCH_SETTINGS, "current", None)
    pipelined = search_settings is not None and search_settings.pipelined and not search_settings.committed
    for name in names:
        if name not in ("enable_sort", "plan_cache_mode"):
            raise ValueError(f"Not a setting _set_hnsw changes: {name}")
        if pipelined:
            search_settings.hold(f"RESET {name}")
            continue
        with connection.cursor() as cursor:
            cursor.execute(f"RESET {name}")
