"""Copies of owners' open vectors kept in the process: where the sparse agents' search takes its candidates.

An agent's search over an owner most of whose journal is gated (few open memories
beside many gated ones: search.hints._sparse_in_own_journal) is exact: every open
row's half-precision copy ranked against the query, the nearest 4 per result
asked passed through the gate at full precision. Ranking ~10,000 copies in
PostgreSQL reads each one from the index (an index-only scan, ~0.4-0.6 µs per
row): most of the search. A process that searches that owner keeps the open
memories' vectors as one matrix (full precision, float32: ~15 MB per 10,000)
and ranks them itself (~0.3 ms), then hands the nearest ids to the same gated
statement; ranked as that statement ranks them, a few more than asked are
enough (search.knn_open._kept_open_neighbours).

This is a candidate source, never the gate. The ids it gives are only ever
ranked through `visible` (the compiled gate and filters) in SQL, so a copy that
is out of date cannot show a memory the gate refuses: at worst it misses one a
grant opened, and it is not used then. Whether it is whole is asked in the
same statement that ranks its candidates, with the same snapshot
(STALE_SQL): the copy records the snapshot it was read with, the triggers of
migration 0016 record every transaction that changes an owner's open,
embedded gate rows (MemoryGateChange), and a copy misses a change exactly
when a row of a transaction its snapshot did not see is visible now. A stale
copy is dropped and the search ranks in SQL as before; it is read again on a
later search (at most every RELOAD_AFTER_SECONDS per owner).

The search that finds no copy to use does not wait for one to be read (~0.15 s
per 10,000 rows, up to a second at MAX_ROWS): it ranks in SQL and the copy is
read on a thread of the process's own, on a connection of its own (_Reader);
the searches after it use the copy once it is there.

Only in the search's own transaction (search.statements._search_transaction, outermost):
in a caller's transaction that has written, the caller's own uncommitted changes
would count as seen by a snapshot read before them.

Kept MAX_AGE_SECONDS at most; the prune (gate_changes_prune) deletes a change row
PRUNE_AFTER_SECONDS after it saw the transaction ended, which is later than any
copy that could have missed it is kept.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection

from .models import EMBEDDING_DIMENSIONS, Memory, MemoryGate, MemoryGateChange

logger = logging.getLogger(__name__)

# Off: every sparse search ranks in SQL (for measuring; a server switches copies off with
# KEEPSAKE_SEARCH_OPEN_VECTORS_ROWS=0).
ENABLED = True
# Owners with more open, embedded rows than this get a copy: below it the SQL ranking
# costs ~1-2 ms and a copy would save little.
MIN_ROWS = 2_000
# Rows kept per process, all owners together (~1.5 KB each as float32): the copies read
# longest ago are dropped first. 0: none kept, none read.
MAX_ROWS = settings.SEARCH_OPEN_VECTORS_ROWS
# A copy is used for at most this long after it was read; the prune keeps a change
# row at least PRUNE_AFTER_SECONDS after the transaction ended, longer than this.
MAX_AGE_SECONDS = 600.0
PRUNE_AFTER_SECONDS = 2 * MAX_AGE_SECONDS
# An owner's copy is read at most this often: an owner whose gate changes all the
# time is searched in SQL between reads instead of paying a read (~0.15 s for
# 10,000 rows) on every search.
RELOAD_AFTER_SECONDS = 30.0
# A copy is read on the process's reader thread (_Reader) while the search that asked for
# it ranks in SQL. False: the search reads it itself, in its own transaction, and uses it
# at once (tests that look at the copy's answers; obtain(background=False) does the same).
READ_IN_BACKGROUND = True

# The open rows as the gate table lists them (memory_gate_open_vectors), with the memory's own
# full-precision vector: the copy ranks them as the gated statement will, so it need hand over
# only a few more than asked. Each vector_send: dimensions (int16), unused (int16), then the
# values (float32), network byte order.
_LOAD_SQL = (
    "SELECT pg_current_snapshot()::text, count(*), "
    "coalesce(string_agg(uuid_send(memory.id), ''::bytea), ''::bytea), "
    "coalesce(string_agg(vector_send(memory.embedding), ''::bytea), ''::bytea) "
    f"FROM {MemoryGate._meta.db_table} gate "
    f"JOIN {Memory._meta.db_table} memory ON memory.id = gate.memory_id "
    "WHERE gate.owner_id = %s AND gate.blocked_count = 0 AND gate.embedding IS NOT NULL "
    "AND memory.embedding IS NOT NULL"
)


@dataclass(frozen=True, eq=False)
class OpenVectors:
    """An owner's open, embedded memories as read with `snapshot`: ids and unit-scaled vectors."""

    owner_id: int
    snapshot: str
    ids: np.ndarray  # (n, 16) uint8: each memory id's bytes
    matrix: np.ndarray  # (n, EMBEDDING_DIMENSIONS) float32: the vectors scaled to length 1
    read_at: float  # time.monotonic() before the statement that read them

    def __len__(self) -> int:
        return len(self.ids)

    def nearest(self, embedding: Sequence[float], count: int) -> list[uuid.UUID]:
        """The ids of the `count` rows nearest to `embedding` by cosine distance, in no particular order."""
        query = np.asarray(embedding, dtype=np.float32)
        similarity = self.matrix @ query  # the query's length scales every row alike
        if count < len(similarity):
            chosen = np.argpartition(-similarity, count - 1)[:count]
        else:
            chosen = np.arange(len(similarity))
        return [uuid.UUID(bytes=self.ids[index].tobytes()) for index in chosen]


_KEPT: dict[int, OpenVectors] = {}
_READ_AT: dict[int, float] = {}
_LOCK = threading.Lock()


def kept(owner_id: int) -> OpenVectors | None:
    """The owner's copy, if one was read in the last MAX_AGE_SECONDS (whole or not: STALE_SQL says)."""
    copy = _KEPT.get(owner_id)
    if copy is None:
        return None
    if time.monotonic() - copy.read_at > MAX_AGE_SECONDS:
        forget(owner_id, copy)
        return None
    return copy


def forget(owner_id: int, copy: OpenVectors | None = None) -> None:
    """Drop the owner's copy (only `copy`, when given: not a newer one another thread read)."""
    with _LOCK:
        if copy is None or _KEPT.get(owner_id) is copy:
            _KEPT.pop(owner_id, None)


def caches() -> tuple[dict, dict]:
    """The copies and when each owner's was read: emptied with retrieval's hints (forget_hints).

    Once no read is under way: a read begun before would keep its copy after they were emptied
    (or, in a bench that searches two databases in turn, among the other database's).
    """
    settle()
    return _KEPT, _READ_AT


def obtain(owner_id: int, *, background: bool = True) -> OpenVectors | None:
    """The owner's copy when one is kept; otherwise None, and a read of it is begun.

    Begun at most every RELOAD_AFTER_SECONDS per owner. On the reader thread when
    `background` and READ_IN_BACKGROUND (the caller does not wait: None); otherwise
    read here, on the caller's connection, and returned when kept (not kept: fewer
    than MIN_ROWS or more than MAX_ROWS rows). `background` False: the caller's
    connection is not the one the settings name (a bench that points the default
    alias at another database), where the reader's would not go.
    """
    copy = kept(owner_id)
    if copy is not None or not _claim(owner_id):
        return copy
    if background and READ_IN_BACKGROUND and _READER.submit(owner_id):
        return None
    return _read(owner_id)


def _claim(owner_id: int) -> bool:
    """Whether the owner's copy may be read now (none read in the last RELOAD_AFTER_SECONDS);
    if so, the read counts from now."""
    now = time.monotonic()
    with _LOCK:
        last = _READ_AT.get(owner_id)
        if last is not None and now - last < RELOAD_AFTER_SECONDS:
            return False
        if len(_READ_AT) > 10 * len(_KEPT) + 1000:
            _READ_AT.clear()
        _READ_AT[owner_id] = now
    return True


def _read(owner_id: int) -> OpenVectors | None:
    """The read itself, on this thread's connection. One statement, so the rows and the
    snapshot they were read with agree."""
    now = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(_LOAD_SQL, [owner_id])
        snapshot, count, id_bytes, vector_bytes = cursor.fetchone()
    if count <= MIN_ROWS or count > MAX_ROWS:
        return None
    ids = np.frombuffer(bytes(id_bytes), dtype=np.uint8).reshape(count, 16)
    # Four bytes of header per row: as wide as one value.
    values = np.frombuffer(bytes(vector_bytes), dtype=">f4").reshape(count, 1 + EMBEDDING_DIMENSIONS)
    if not (values[:, :1].view(">i2")[:, 0] == EMBEDDING_DIMENSIONS).all():
        return None
    matrix = values[:, 1:].astype(np.float32)
    lengths = np.linalg.norm(matrix, axis=1, keepdims=True)
    np.divide(matrix, lengths, out=matrix, where=lengths > 0)
    # A zero vector has no direction: pgvector's cosine distance to it is NaN, which sorts
    # after every number; NaN here too, which argpartition puts last.
    matrix[lengths[:, 0] == 0] = np.nan
    copy = OpenVectors(owner_id=owner_id, snapshot=snapshot, ids=ids, matrix=matrix, read_at=now)
    with _LOCK:
        _KEPT.pop(owner_id, None)
        while _KEPT and sum(len(other) for other in _KEPT.values()) + count > MAX_ROWS:
            oldest = min(_KEPT, key=lambda owner: _KEPT[owner].read_at)
            del _KEPT[oldest]
        _KEPT[owner_id] = copy
    return copy


class _Reader:
    """One thread per process that reads copies on a connection of its own, opened for each read.

    A read is one statement in autocommit (its snapshot is the statement's, as on the
    search's connection). The connection is closed after each read: reads are rare (at
    most every RELOAD_AFTER_SECONDS per owner), and an idle session per process would be
    held for nothing. A read that fails is logged; the owner's searches rank in SQL and
    ask again after RELOAD_AFTER_SECONDS.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._pid: int | None = None
        self._pending: list[Future] = []

    def submit(self, owner_id: int) -> bool:
        """Begin reading the owner's copy on the reader thread; False when it cannot take it."""
        with self._lock:
            # Per process: a thread does not survive a fork (gunicorn's workers).
            if self._executor is None or self._pid != os.getpid():
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="keepsake-open-vectors")
                self._pid = os.getpid()
                self._pending = []
            try:
                future = self._executor.submit(self._run, owner_id)
            except RuntimeError:  # shutting down
                return False
            self._pending = [earlier for earlier in self._pending if not earlier.done()] + [future]
        return True

    @staticmethod
    def _run(owner_id: int) -> None:
        try:
            _read(owner_id)
        except Exception:
            logger.warning(
                "Reading the open vectors of owner %s failed; their searches rank in SQL.",
                owner_id,
                exc_info=True,
            )
        finally:
            # Looked up in the reader thread: `connection` is each thread's own.
            connection.close()

    def settle(self) -> None:
        """Wait for the reads begun so far (tests, benches: before they look at the copies)."""
        with self._lock:
            pending = list(self._pending) if self._pid == os.getpid() else []
        for future in pending:
            future.result()


_READER = _Reader()


def settle() -> None:
    """Wait for the copies being read on the reader thread to be kept (or given up)."""
    _READER.settle()


# Whether the owner (%s) has a change the snapshot (%s, %s: the copy's) did not see: true
# when a change row of a transaction that snapshot did not see is visible to the statement
# that asks. Transactions before the snapshot's xmin had all ended when it was taken: only
# the owner's rows from there on are looked at (the unique index on owner and xid).
STALE_SQL = (
    f"EXISTS (SELECT 1 FROM {MemoryGateChange._meta.db_table} change WHERE change.owner_id = %s "
    "AND change.xid >= pg_snapshot_xmin(%s::pg_snapshot)::text::bigint "
    "AND NOT pg_visible_in_snapshot(change.xid::text::xid8, %s::pg_snapshot))"
)


def stale_params(copy: OpenVectors) -> list:
    return [copy.owner_id, copy.snapshot, copy.snapshot]


def prune(*, after_seconds: float = PRUNE_AFTER_SECONDS) -> tuple[int, int]:
    """Mark the change rows of transactions that have ended, delete those marked `after_seconds` ago.

    (rows marked, rows deleted). A transaction with an id below the current
    snapshot's xmin has ended; clock_timestamp() is read after that snapshot, so
    `completed_at` is never earlier than the end. A copy read before that end
    is used at most MAX_AGE_SECONDS after its read, which was before the end:
    the row outlives every copy that needs it when after_seconds > MAX_AGE_SECONDS.
    """
    table = MemoryGateChange._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET completed_at = clock_timestamp() WHERE completed_at IS NULL "
            "AND xid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
        )
        marked = cursor.rowcount
        cursor.execute(
            f"DELETE FROM {table} WHERE completed_at < clock_timestamp() - make_interval(secs => %s)",
            [after_seconds],
        )
        return marked, cursor.rowcount
