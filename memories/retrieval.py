"""Retrieval: the search engine every surface searches memories with, inside the gate's scopes.

The consent gate lives in memories/gate.py and nowhere else; this module takes its
scopes (their SQL) and never decides visibility. For agents the scope is
`agent_visible_memories(owner)`: a queryset whose SQL keeps only memories that

- belong to the owner,
- have no participant that is not positively known to have granted consent
  (`NOT EXISTS` a participant for which `NOT EXISTS` a granted person row: a
  participant whose person row is missing blocks too, fail closed); a memory with
  no participants counts the owner's Self person as its participant (revoking
  Self hides the owner's untagged memories; no Self row hides them too), and whose
  source person, when one is recorded, has granted consent too ("who told me" is
  a participant in all but name),
- have not expired (`expires_at <= now()`) and have not been superseded.

Every agent-facing read (`respect_consent=True`) starts from that queryset, so
the exclusion happens inside each SQL statement: `LIMIT k` counts only memories
that passed, and no result, rank, score or count is ever computed from a memory
that did not. Owner reads (`respect_consent=False`) are scoped to the owner and
see everything. Nothing is cached: a consent change is visible to the very next
query because every query re-reads `people_person`.

Search is hybrid: nearest neighbours by cosine distance over the HNSW index
plus PostgreSQL full text (`search_vector`, 'english'), fused with reciprocal
rank fusion. Memories not yet embedded are found by full text alone.

How the vector side stays fast and exact enough is explained at
`_nearest_neighbours`; `python manage.py bench_retrieval` measures it. Agent
searches first consult MemoryGate.blocked_count, a per-memory count of blocking
people kept exact by database triggers, to pick a strategy; it is never the gate
(see "the maintained gate count" below for why a wrong count cannot leak).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy
import psycopg
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.search import SearchHeadline, SearchQuery
from django.core.exceptions import EmptyResultSet, ValidationError
from django.db import DatabaseError, connection, connections, transaction
from django.db.models import (
    BooleanField,
    Count,
    F,
    Prefetch,
    Q,
    QuerySet,
)
from django.db.models.expressions import RawSQL
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from config.rows import columns, instance
from memories import open_vectors
from memories.gate import _OWNER_PLACEHOLDER as _OWNER_PLACEHOLDER
from memories.gate import (
    _compiled_circle_scope,
    _compiled_scope,
    _owner_id,
    _scope_sql,
    memory_scope,
)

# The gate's names, also reachable here as retrieval.<name> by the benchmarks and the tests
# of this engine's paths (the gate itself decides; nothing here does).
from memories.gate import _mentions_placeholder as _mentions_placeholder
from memories.gate import agent_visible_memories as agent_visible_memories
from memories.gate import circle_visible_memories as circle_visible_memories
from memories.models import (
    EMBEDDING_DIMENSIONS,
    EdgeKind,
    Memory,
    MemoryEdge,
    MemoryGate,
    MemoryParticipant,
    MemoryText,
)
from memories.selectors import MemoryFilters, memory_apply_filters
from people.models import Person

logger = logging.getLogger(__name__)

MAX_LIMIT = 100
# Reciprocal rank fusion constant (Cormack et al. use 60): damps the head of each
# list so one list's first place does not drown the other list's agreement.
RRF_K = 60
# Each side of the hybrid search contributes at least this many candidates, so a
# memory ranked modestly by both lists can still win the fusion.
FUSION_DEPTH_MIN = 20

# --- vector search tuning (see _nearest_neighbours; measured by bench_retrieval) ---
# Owners with at most this many memories get exact search: it costs ~1 µs per
# memory (about 2 ms here), is exactly right, and makes a small owner's latency
# independent of how much other owners keep in the shared HNSW index.
EXACT_SEARCH_MAX_MEMORIES = 2_000
# When the bounded index scan comes back short (few memories pass the gate and
# filters), owners up to this size get an exact search to fill LIMIT k. Above it
# the exact pass would cost more than ~20 ms, so the index's answer stands.
EXACT_FALLBACK_MAX_MEMORIES = 20_000
# The owner's index (all memories, full precision). Measured at 100k memories
# (clustered vectors): ef_search 40 gives recall@10 of ~0.85, 100 gives ~1.0.
ANN_EF_SEARCH = 100
# relaxed_order returns rows only roughly by distance: fetch twice k, re-sort.
ANN_OVERFETCH = 2
# ef_search grows with what is fetched: hybrid search asks each side for 20
# (FUSION_DEPTH_MIN), fetching 40. Measured on 100k memories (realistic text, idle
# machine, 60 queries): the owner's 20 nearest came back with recall 1.000 at
# ef_search 100, 120, 160 and 200, costing 2.6 / 2.8 / 3.7 / 4.6 ms p50; under
# load an earlier run saw ~0.99 at 100. Three per row fetched (120) keeps a margin.
ANN_EF_PER_FETCHED = 3
# pgvector's ceiling for hnsw.ef_search; an owner who is a thin share of the table
# gets up to this much (_approximate_neighbours).
ANN_EF_SEARCH_MAX = 1_000
# Bounded on purpose: past this many visited tuples pgvector stops exploring and
# only drains the candidates it already holds, so a query nothing can satisfy
# ends instead of walking the whole graph (default 20,000).
ANN_MAX_SCAN_TUPLES = 2_000
# pgvector also ends an iterative scan when its memory passes hnsw.scan_mem_multiplier
# x work_mem (4 MB by default): with full-precision 384-dimension vectors, a few
# thousand visited entries. Entries of deleted rows that VACUUM has not removed yet
# count against both bounds. pgvector's default, set with the others so that it is
# this module's choice (tests that check the gate rather than the budget raise it:
# their database keeps every rolled-back row's entries).
ANN_SCAN_MEM_MULTIPLIER = 1
# The agents' index (memories nothing blocks, half precision; m=24,
# ef_construction=128). When few of an owner's memories are open, an agent's ten
# nearest include memories barely related to the query: near-ties that only a
# near-exhaustive scan finds (measured at 100k memories, 90% gated, 10k open:
# recall@10 ~0.97 at ef_search 100, 0.982-0.99 at 150-160, 0.987-0.997 at 200,
# 0.993-0.998 at 300, the graph differing from build to build; 300 cost 7-9.5 ms
# p50, reading ~9,000 index pages). Those owners are searched exactly instead
# (_sparse_in_own_journal, _open_candidates_neighbours): their open rows' copies
# ranked from memory_gate_open_vectors, an index-only scan of the owner's entries
# side by side (~1,100 pages for 10k; 2026-11-26, 100 queries: p50 / p95 4.4 / 5.0
# ms against 13.9 / 15.2 reading the same rows from the table), recall 1.000.
# With many open a narrow search is as
# good (2026-11-25, 60 queries against exact gated truth): recall@10 and @20
# 1.000 at ef_search 60 with 10% and 50% gated (0.998 at 40), and at 80% gated
# (20k open) @10 1.000 and @20 0.98 whatever the width (40 to 200); each step
# of 20 costs ~0.7 ms. Fetching more than a hybrid's 40 widens it in step.
# 2026-11-26 (sixth session, 200 queries against exact gated truth, in one run
# beside pgvector's defaults): at 50% gated ef_search 40 kept recall@10 1.000 at
# p50 / p95 3.8-4.0 / 5.0-6.5 ms against 4.5-5.0 / 6.0-7.0 at 60; at 10% 0.9945
# (60: 1.000) at 3.9-4.9 / 5.2-6.6 against 4.8-5.5 / 6.3-8.1. The goal is recall
# >= 0.99 at the fastest peer's p95 (that run: 3.7-5.4 / 5.2-6.6, recall 0.90),
# so a 10-result search now reads 40. 2026-11-26 (seventh session, 200 queries
# against the exact fused reference, alternating twice): a hybrid's 40 candidates
# read at 40 instead of 60 kept fused recall@10 1.000 at 10% and 50% gated, p50 /
# p95 -1.4 / -1.6 ms at 10% and -0.7 / -0.1 at 50%: one entry read per row fetched.
OPEN_ANN_EF_SEARCH = 40
OPEN_ANN_EF_PER_FETCHED = 1.0
# "Few open": at most this many (counted on the open-gate index, ~1.2 ms; see _open_hint),
# and more than OPEN_ANN_SPARSE_GATED of the owner's memories per open one (over 80%
# gated): searched exactly (~0.4 us per open memory, 6 ms at this bound). Not for a
# small owner, whose nearest open memories are near ones: 2026-11-26, an owner of
# 10,000 memories with 9,000 open among 109,000 entries (100 queries against exact
# gated truth) had recall@20 1.000 at ef_search 60, 100, 150 and 300, costing 4.3 /
# 5.4 / 7.4 / 14.7 ms p50.
OPEN_ANN_SPARSE_MAX = 15_000
OPEN_ANN_SPARSE_GATED = 5
OPEN_ANN_MAX_SCAN_TUPLES = 6_000
# Without filters (the gate alone, _compiled_scope) nearly every open row passes, so the
# agents' index statement first takes this many more than it needs from the index and
# probes them through the gate by id, a statement planned once per connection
# (_open_index_neighbours); when fewer than it needs pass, the scan that goes on until
# enough pass runs after it. OPEN_ANN_PLANNED_ONCE = False: that scan alone, as before
# (for measuring). Measured 2026-11-27 (10% gated, 200 queries alternating, k=10): p50
# 2.54 / 2.57 ms taking 20 / 28 candidates against 3.13 / 3.11 for the scan planned on
# every search, the same ten in every query; 40 candidates for 20 cost as much as that scan.
OPEN_ANN_SPARE_CANDIDATES = 4
OPEN_ANN_PLANNED_ONCE = True
# Agent searches first ask the maintained gate count (MemoryGate, a hint) how many
# of the owner's memories nothing blocks. None: answer at once. Up to this many:
# exact search over just those, ranked on the gate table's half-precision copies
# (a narrow table, ~0.7 µs per memory) and re-ranked at full precision. More:
# the agents' HNSW index.
EXACT_CANDIDATES_MAX = 2_000
# How many of the nearest open memories (by the half-precision copy) the exact
# path re-ranks at full precision and passes through the gate, per result asked.
EXACT_CANDIDATES_OVERFETCH = 4
# A copy of the open memories' full-precision vectors kept in the process ranks them as the
# gated statement does (_kept_open_neighbours): it hands over this many more than asked,
# for near-ties the two compute apart in the last bits.
KEPT_SPARE_CANDIDATES = 4
# The full-text side ranks at most this many of the memories a query matches
# (see _text_matches): queries that match more are too broad for ts_rank to
# tell them apart usefully, and reading that many text vectors is what costs.
TEXT_CANDIDATES_MAX = 3_000


@dataclass(frozen=True)
class SearchHit:
    """One result. `memory` has its participants (with their people) prefetched.

    `score` orders the results (higher is better): the fused reciprocal-rank score
    for memory_search, the cosine similarity for memory_similar. `similarity`
    (1 - cosine distance) and `text_rank` (ts_rank) say which side matched.
    """

    memory: Memory
    score: float
    similarity: float | None = None
    text_rank: float | None = None


@dataclass(frozen=True)
class RelevanceCutoff:
    """Which of the gated candidates count as relevant to a query (see _relevant).

    A memory is relevant when
    - its words match the query (full text) and its meaning is not far off:
      similarity >= `min_text_similarity` (or unknown: not embedded yet, or the
      query could not be embedded), or
    - its meaning alone is close: similarity >= `min_similarity`;
    and, when `margin` is set, its similarity is within `margin` of the best
    relevant memory's (a question's answer needs the closest few, not everything
    on the topic).

    The defaults keep every candidate (NO_CUTOFF): the cosine similarity lies in
    [-1, 1]. Calibrated values come from settings (search_relevance,
    question_relevance), measured by `python manage.py bench_relevance`.
    """

    min_similarity: float = -1.0
    min_text_similarity: float = -1.0
    margin: float | None = None


NO_CUTOFF = RelevanceCutoff()


def search_relevance() -> RelevanceCutoff:
    """Searches (web, API, MCP): every word typed matched is evidence enough; meaning alone must be close."""
    return RelevanceCutoff(min_similarity=settings.RELEVANCE_MIN_SIMILARITY)


def question_relevance() -> RelevanceCutoff:
    """An agent's question: its words are ORed (one common word matches a lot), so
    a word match needs some meaning too, and only the closest memories go to the agent."""
    return RelevanceCutoff(
        min_similarity=settings.RELEVANCE_MIN_SIMILARITY,
        min_text_similarity=settings.RELEVANCE_QUESTION_MIN_TEXT_SIMILARITY,
        margin=settings.RELEVANCE_QUESTION_MARGIN,
    )


@dataclass(frozen=True)
class RelatedHit:
    memory: Memory
    kind: str
    weight: float

    @property
    def kind_label(self) -> str:
        return EdgeKind(self.kind).label


def _with_people(memories: QuerySet[Memory]) -> QuerySet[Memory]:
    return memories.select_related("source_person").prefetch_related(
        Prefetch(
            "participants",
            queryset=MemoryParticipant.objects.select_related("person").order_by("person__display_name"),
        )
    )


# --- vector side -------------------------------------------------------------------


def _exact_neighbours(
    scope: QuerySet[Memory], embedding: Sequence[float], fetch: int
) -> list[tuple[uuid.UUID, float]]:
    """Exact search over an ORM scope (the circle paths, the fallbacks, the benches' references)."""
    try:
        visible = _scope_sql(scope)
    except EmptyResultSet:  # a scope the ORM knows matches nothing (pk__in=[])
        return []
    return _visible_neighbours(visible, embedding, fetch, exact=True)


@functools.lru_cache(maxsize=16)
def _vector_literal(values: tuple[float, ...]) -> str:
    return "[" + _vector_format(len(values)) % values + "]"


@functools.cache
def _vector_format(dimensions: int) -> str:
    # Nine significant digits name every float32 exactly (FLT_DECIMAL_DIG), and
    # pgvector parses each number to a float32: the same vector as the shortest
    # form, formatted in one % (0.13 ms for 384 numbers, against 0.4 ms for
    # pgvector's Vector.to_text, which formats numpy scalars one by one).
    return ",".join(["%.9g"] * dimensions)


def _vector_text(embedding: Sequence[float]) -> str:
    """The query vector as pgvector's text literal, formatted once per search.

    Rounded to float32 first, as pgvector stores it: nine digits of a value that
    is not a float32 could round to its neighbour (a query vector from the API).
    """
    return _vector_literal(tuple(numpy.asarray(embedding, dtype=numpy.float32).tolist()))


def _visible_neighbours(
    visible: tuple[str, list], embedding: Sequence[float], fetch: int, *, exact: bool
) -> list[tuple[uuid.UUID, float]]:
    """The `fetch` rows of `visible` nearest to `embedding`, in one statement on the compiled scope.

    `visible` (the owner's scope or the gate, and the filters: _compiled_scope or
    _scope_sql) becomes the FROM, which PostgreSQL flattens into the query.
    exact: sorted by distance after the WHERE (+ 0: an expression the HNSW index
    cannot serve), as _exact_neighbours; otherwise ordered by the distance, which
    the planner serves from memory_embedding_hnsw (with the settings _set_hnsw
    made). Plain SQL: the ORM's statement cost more to build than to run.
    """
    scope_sql, scope_params = visible
    vector = _vector_text(embedding)
    distance = "visible.embedding <=> %s::vector"
    order = f"({distance}) + 0, visible.id" if exact else distance
    # Planned each time (a whale's best plan is not a small owner's), but bound on the
    # server: the vector travels as a parameter, not as ~4 KB of literal to parse twice.
    rows = _fetch_prepared(
        f"SELECT visible.id, {distance} FROM ({scope_sql}) AS visible (id, embedding) "
        f"WHERE visible.embedding IS NOT NULL ORDER BY {order} LIMIT %s",
        [vector, *scope_params, vector, fetch],
        prepared=False,
    )
    return rows if exact else _by_distance(rows)


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
    if not getattr(settings, "SEARCH_PIPELINE", True):
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
        if not getattr(settings, "SEARCH_SIDES_IN_PARALLEL", False) or search is None or not search.outermost:
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
    *, ef_search: int, max_scan_tuples: int, backlog_of: int | None = None
) -> Callable[[], bool | None]:
    """SET LOCAL the HNSW scan's settings (ANN_SCAN_MEM_MULTIPLIER too); with `backlog_of` (an
    owner id), also ask whether that owner has open rows waiting for the agents' index
    (_open_hint's probe). Returns a function that gives that answer (None when not asked):
    read it after the index statement.

    One statement for the settings (each costs ~0.2 ms on its own), the search
    transaction's own when this is its first statement (_SearchSettings), and the
    probe when _open_hint left it to the scan (a statement less for a big owner's search).
    In a pipelined search transaction the statement is held back and goes to the server
    with the next one, the index statement, in its round trip (_SearchSettings.hold).
    """
    search_settings = getattr(_SEARCH_SETTINGS, "current", None)
    first = search_settings.take() if search_settings is not None else None
    probe = f"EXISTS ({_BACKLOG_PROBE})" if backlog_of is not None else "NULL"
    sql = (
        f"SELECT {probe}, set_config('hnsw.iterative_scan', 'relaxed_order', true), "
        "set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', %s, true), "
        "set_config('hnsw.scan_mem_multiplier', %s, true)" + (f", {first}" if first else "")
    )
    params = [
        *([backlog_of] if backlog_of is not None else []),
        str(ef_search),
        str(max_scan_tuples),
        str(ANN_SCAN_MEM_MULTIPLIER),
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


def _by_distance(rows) -> list[tuple[uuid.UUID, float]]:
    # relaxed_order and half-precision ranking hand rows back only roughly by
    # distance: re-sort on the full-precision distance.
    return sorted(rows, key=lambda row: (row[1], row[0]))


def _approximate_neighbours(
    visible: tuple[str, list], embedding: Sequence[float], fetch: int, *, owner_id: int
) -> list[tuple[uuid.UUID, float]]:
    """The owner's path: HNSW over all memories (memory_embedding_hnsw).

    The index holds every owner's memories, and its scan meets this owner's at
    the rate of their share of the table (_owner_share): ef_search grows as the
    share shrinks, so that the first pass already holds about as many of this
    owner's memories as an owner alone in the table would get (a 100,000-memory
    owner among a million: recall@10 0.920 at ef_search 100).
    """
    widened = math.ceil(fetch * ANN_EF_PER_FETCHED / max(_owner_share(owner_id), 1e-6))
    ef_search = max(ANN_EF_SEARCH, min(ANN_EF_SEARCH_MAX, widened))
    _set_hnsw(ef_search=ef_search, max_scan_tuples=max(ANN_MAX_SCAN_TUPLES, 2 * ef_search))
    return _visible_neighbours(visible, embedding, fetch, exact=False)


def _thin_in_the_table(owner_id: int, fetch: int) -> bool:
    """Whether even the widest scan (ANN_EF_SEARCH_MAX) would meet too few of a small owner's memories.

    Such an owner (at most EXACT_FALLBACK_MAX_MEMORIES memories, estimated as
    their share times the table's rows) gets exact search at once rather than a
    scan that comes back short and pays for both.
    """
    share = _owner_share(owner_id)
    if fetch * ANN_EF_PER_FETCHED <= ANN_EF_SEARCH_MAX * share:
        return False
    return share * _relation_rows(Memory._meta.db_table) <= EXACT_FALLBACK_MAX_MEMORIES


# Each owner's share of memories_memory per the planner's statistics (the most
# common owner_id values and their frequencies, kept by ANALYZE), read again after
# HINT_TTL_SECONDS: a hint for ef_search, never for what is shown.
# [(monotonic time read, {owner_id: share}, share of an owner not listed)]
_OWNER_SHARES: list[tuple[float, dict[int, float], float]] = []


def _owner_share(owner_id: int) -> float:
    """The owner's estimated fraction of all memories; 1.0 when the statistics say nothing."""
    now = time.monotonic()
    if not _OWNER_SHARES or now - _OWNER_SHARES[0][0] > HINT_TTL_SECONDS:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT most_common_vals::text, most_common_freqs FROM pg_stats "
                "WHERE schemaname = current_schema() AND tablename = %s AND attname = 'owner_id'",
                [Memory._meta.db_table],
            )
            row = cursor.fetchone()
        shares: dict[int, float] = {}
        if row and row[0] and row[1]:
            owners = [int(value) for value in row[0].strip("{}").split(",") if value]
            shares = dict(zip(owners, (float(share) for share in row[1]), strict=False))
        # An owner the statistics do not list holds at most the least common listed share.
        unlisted = min(shares.values()) if shares else 1.0
        _OWNER_SHARES[:] = [(now, shares, unlisted)]
    _, shares, unlisted = _OWNER_SHARES[0]
    return min(1.0, shares.get(owner_id, unlisted))


def _open_index_neighbours(
    visible: tuple[str, list],
    embedding: Sequence[float],
    *,
    owner_id: int,
    fetch: int,
    ef_search: int,
    unindexed: bool | None = True,
) -> list[tuple[uuid.UUID, float]]:
    """The agents' path: HNSW over the gate rows nothing blocks (memory_gate_open_hnsw).

    `visible` (the gate and the filters: _compiled_scope or _scope_sql, the
    ORM's SQL) becomes the FROM of this statement, so PostgreSQL flattens it into
    one query: walk the open-gate index by the half-precision copy, probe each
    memory it yields against the gate, stop at `fetch` that pass; each returned
    with its full-precision distance. Written as SQL around the compiled scope
    because building the same join in the ORM costs more than running it.

    Without filters (`visible` is the gate alone, _compiled_scope), the index's
    nearest `fetch` + OPEN_ANN_SPARE_CANDIDATES rows of the owner are taken first
    and ranked through `visible` by id (_ranked_through): a prepared statement, so
    PostgreSQL plans it once per connection (planning the gate around the scan was
    ~0.6 ms of ~3 on every search). `owner_id + 0` leaves the index scan as its
    only way to the owner's rows (a generic plan knows no owner's size, and reading
    a big owner's rows by owner_id and sorting them costs a full exact search).
    When fewer than `fetch` of those pass (the lifecycle's hidden memories, or few
    open rows at all), the scan that goes on until `fetch` pass runs after it.

    The index holds the open rows that are `indexed`; the ones a grant opened
    since the last memories.index_opened_gates run are searched exactly beside it
    (_unindexed_open_neighbours) and merged by distance, so a memory a grant opens
    is found on the very next query. `unindexed=False`: the caller has just
    asked (_open_hint) and there are none, so that search is skipped; None: not
    asked yet, so the statement that sets the scan's settings asks.
    """
    scope_sql, scope_params = visible
    by_id = OPEN_ANN_PLANNED_ONCE and scope_sql == _compiled_scope(owner_id, respect_consent=True)[0]
    candidates = fetch + OPEN_ANN_SPARE_CANDIDATES
    backlog = _set_hnsw(
        # At least as wide as the candidates taken: a LIMIT past ef_search makes the scan
        # resume for the rest (a second pass: +50% of its pages, measured).
        ef_search=max(ef_search, candidates) if by_id else ef_search,
        max_scan_tuples=OPEN_ANN_MAX_SCAN_TUPLES,
        backlog_of=owner_id if unindexed is None else None,
    )
    vector = _vector_text(embedding)
    rows: list[tuple[uuid.UUID, float]] = []
    if by_id:
        gate = MemoryGate._meta.db_table
        nearest_open = (
            f"ARRAY(SELECT memory_id FROM {gate} WHERE owner_id + 0 = %s AND blocked_count = 0 AND indexed "
            "AND embedding IS NOT NULL ORDER BY embedding <=> %s::halfvec "
            # Written in (an int): a generic plan knows the LIMIT, and scans the index for it.
            f"LIMIT {int(candidates)})"
        )
        rows = _ranked_through(visible, vector, (nearest_open, [owner_id, vector]), fetch)
    if len(rows) < fetch:
        # Bound on the server and planned each time, as _visible_neighbours.
        rows = _fetch_prepared(
            f"SELECT visible.id, visible.embedding <=> %s::vector "
            f"FROM ({scope_sql}) AS visible (id, embedding) "
            f"JOIN {MemoryGate._meta.db_table} gate ON gate.memory_id = visible.id "
            "WHERE gate.owner_id = %s AND gate.blocked_count = 0 AND gate.indexed "
            "AND gate.embedding IS NOT NULL AND visible.embedding IS NOT NULL "
            "ORDER BY gate.embedding <=> %s::halfvec LIMIT %s",
            [vector, *scope_params, owner_id, vector, fetch],
            prepared=False,
        )
    if unindexed is None:
        unindexed = backlog()  # read after the index statement: it went with it (_set_hnsw)
    if unindexed:
        rows += _unindexed_open_neighbours(visible, vector, owner_id=owner_id, fetch=fetch)
    return _by_distance(rows)[:fetch]


def _ranked_through(
    visible: tuple[str, list], vector: str, candidates: tuple[str, list], limit: int
) -> list[tuple[uuid.UUID, float]]:
    """The `limit` nearest, at full precision, of the memories `candidates` names that pass `visible`.

    `candidates`: an SQL array of memory ids with its params, either a subquery
    (`ARRAY(SELECT ...)`: ranked in the same statement, no ids shipped) or
    `%s::uuid[]` with a list. `visible` (the gate and the filters:
    _compiled_scope, _compiled_circle_scope or _scope_sql) decides each one. The
    exact paths rank their few candidates here: plain SQL around the compiled
    scope, because the ORM's statement cost more to build (~5 ms) than to run.
    + 0 on the order: a sort over these few, never an HNSW index, whose nearest
    few over the whole table would then be filtered down to these (too few),
    whenever the statistics make that look cheap.
    """
    scope_sql, scope_params = visible
    ids_sql, ids_params = candidates
    # Prepared: whatever the values, the plan looks the candidates up by id (the
    # pkey), so a generic plan fits; planning the gate around them cost 0.4-0.7 ms
    # of the statement.
    return _fetch_prepared(
        "SELECT visible.id, visible.embedding <=> %s::vector "
        f"FROM ({scope_sql}) AS visible (id, embedding) "
        f"WHERE visible.id = ANY({ids_sql}) AND visible.embedding IS NOT NULL "
        "ORDER BY (visible.embedding <=> %s::vector) + 0, visible.id LIMIT %s",
        [vector, *scope_params, *ids_params, vector, limit],
    )


def _unindexed_open_neighbours(
    visible: tuple[str, list], vector: str, *, owner_id: int, fetch: int
) -> list[tuple[uuid.UUID, float]]:
    """Exact search among the owner's open rows not in the agents' index yet (memory_gate_unindexed_idx).

    Usually there are none, and one probe of that (empty) partial index says so
    before the gate's statement is planned. Otherwise there are as many as the
    last grants opened, until the task has run (seconds; minutes for 10,000): as
    _open_candidates_neighbours does, they are ranked by their half-precision
    copies on the narrow gate table, and the nearest few per row asked go
    through `visible` at full precision. When the gate or the filters leave
    fewer than `fetch` of those and there were more, every unindexed row that
    passes `visible` is ranked instead. Either way nothing nearer is missed
    (+ 0: a sort, never an HNSW index; see _open_candidates_neighbours).
    """
    gate = MemoryGate._meta.db_table
    unindexed = f"{gate}.owner_id = %s AND blocked_count = 0 AND NOT indexed AND {gate}.embedding IS NOT NULL"
    candidates_max = fetch * EXACT_CANDIDATES_OVERFETCH
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT memory_id FROM {gate} WHERE {unindexed} "
            f"ORDER BY ({gate}.embedding <=> %s::halfvec) + 0, memory_id LIMIT %s",
            [owner_id, vector, candidates_max + 1],
        )
        candidates = [row[0] for row in cursor.fetchall()]
    if not candidates:
        return []
    rows = _ranked_through(visible, vector, ("%s::uuid[]", [candidates[:candidates_max]]), fetch)
    if len(rows) < fetch and len(candidates) > candidates_max:
        every = f"ARRAY(SELECT memory_id FROM {gate} WHERE {unindexed})"
        rows = _ranked_through(visible, vector, (every, [owner_id]), fetch)
    return rows


def _open_candidates_neighbours(
    visible: tuple[str, list], embedding: Sequence[float], *, owner_id: int, limit: int, open_count: int
) -> list[tuple[uuid.UUID, float]]:
    """Exact search among the memories the count calls open (few, or few beside the gated ones).

    Ranks the owner's open gate rows by their half-precision copies (a sort, not
    the HNSW index: +0; read by an index-only scan of memory_gate_open_vectors,
    the owner's entries side by side however the table's rows lie), takes the
    nearest few per result asked, and lets `visible`
    (the gate and the filters: _compiled_scope or _scope_sql) and the
    full-precision distance decide among them. When the gate or the filters leave
    fewer than `limit` of those and there were more open memories than
    candidates, exact search over all of them instead. Plain SQL around the
    compiled scope, as _visible_neighbours: building these statements in the ORM
    cost more (~5 ms) than running them. For an owner with more than
    open_vectors.MIN_ROWS open, the nearest come from the process's copy of their
    vectors instead, when it has one that is whole (_kept_open_neighbours).
    """
    fetch = limit * EXACT_CANDIDATES_OVERFETCH
    gate = MemoryGate._meta.db_table
    vector = _vector_text(embedding)
    open_rows = f"SELECT memory_id FROM {gate} WHERE owner_id = %s AND blocked_count = 0"
    rows = _kept_open_neighbours(
        visible, vector, embedding, owner_id=owner_id, limit=limit, open_count=open_count
    )
    if rows is None:
        # + 0: a sort over these few, never the agents' index (see _ranked_through).
        nearest_open = (
            f"{open_rows} AND embedding IS NOT NULL "
            "ORDER BY (embedding <=> %s::halfvec) + 0, memory_id LIMIT %s"
        )
        rows = _ranked_through(visible, vector, (f"ARRAY({nearest_open})", [owner_id, vector, fetch]), limit)
    if len(rows) < limit and open_count > fetch:
        rows = _ranked_through(visible, vector, (f"ARRAY({open_rows})", [owner_id]), limit)
    return rows


def _kept_open_neighbours(
    visible: tuple[str, list],
    vector: str,
    embedding: Sequence[float],
    *,
    owner_id: int,
    limit: int,
    open_count: int,
) -> list[tuple[uuid.UUID, float]] | None:
    """_open_candidates_neighbours' first pass from the process's copy of the owner's open vectors.

    The copy (memories/open_vectors.py) holds the open memories' full-precision vectors,
    so its nearest are the gated statement's nearest: without filters (`visible` is the
    gate alone) it hands over `limit` + KEPT_SPARE_CANDIDATES of them, and only if fewer
    than `limit` pass (memories the lifecycle hides) `limit` x EXACT_CANDIDATES_OVERFETCH,
    as the SQL pass takes (with filters, that at once). Each time ranked through
    `visible` at full precision in one statement that also asks whether the copy is
    still whole. None when there is no copy to use (too few open rows, not the search's
    own transaction, not read yet: its read begun on the process's reader thread, at
    most every open_vectors.RELOAD_AFTER_SECONDS) or it has missed a change (then
    dropped): the SQL pass runs instead.
    """
    if not open_vectors.ENABLED or open_vectors.MAX_ROWS <= 0 or open_count <= open_vectors.MIN_ROWS:
        return None
    search_settings = getattr(_SEARCH_SETTINGS, "current", None)
    if search_settings is None or not search_settings.outermost:
        return None
    # None until a copy is read: the reader thread reads it while this search ranks in SQL.
    copy = open_vectors.obtain(owner_id, background=_on_the_configured_database())
    if copy is None:
        return None
    scope_sql, scope_params = visible
    widths = [limit * EXACT_CANDIDATES_OVERFETCH]
    if scope_sql == _compiled_scope(owner_id, respect_consent=True)[0]:
        widths.insert(0, limit + KEPT_SPARE_CANDIDATES)
    rows: list[tuple[uuid.UUID, float]] = []
    for width in widths:
        # The flag row first (its id NULL), then the ranked rows; one statement, one snapshot.
        answer = _fetch_prepared(
            f"SELECT NULL::uuid, NULL::float8, {open_vectors.STALE_SQL} UNION ALL "
            "(SELECT visible.id, visible.embedding <=> %s::vector, NULL::boolean "
            f"FROM ({scope_sql}) AS visible (id, embedding) "
            "WHERE visible.id = ANY(%s::uuid[]) AND visible.embedding IS NOT NULL "
            "ORDER BY (visible.embedding <=> %s::vector) + 0, visible.id LIMIT %s)",
            [
                *open_vectors.stale_params(copy),
                vector,
                *scope_params,
                copy.nearest(embedding, width),
                vector,
                limit,
            ],
        )
        if next(row[2] for row in answer if row[0] is None):
            open_vectors.forget(owner_id, copy)
            return None
        # (A union's rows keep each branch's order in PostgreSQL; sorted again rather than relied on.)
        rows = sorted(
            ((row[0], row[1]) for row in answer if row[0] is not None), key=lambda row: (row[1], row[0])
        )
        if len(rows) >= limit or width >= len(copy):
            break
    return rows


# Owners found to keep more than EXACT_SEARCH_MAX_MEMORIES memories: owner id ->
# monotonic time found (_small_owner); emptied when it holds OPEN_COUNTS_KEPT owners.
_BIG_OWNERS: dict[int, float] = {}


def _small_owner(owner_id: int) -> bool:
    """Whether the owner keeps at most EXACT_SEARCH_MAX_MEMORIES memories: then searches are exact.

    Counted on every call (~0.5 ms at the bound) unless the owner was found bigger
    within HINT_TTL_SECONDS: that answer is kept, since journals seldom shrink by
    thousands within a minute. A hint for the strategy, like the others here: an
    owner who has since deleted down past the bound is searched through the index
    for up to HINT_TTL_SECONDS (and exactly when that comes back short); every
    statement still runs on the owner's scope and the gate. "Small" is never kept:
    an owner who is filling the journal goes on to the index path at once.
    """
    now = time.monotonic()
    found = _BIG_OWNERS.get(owner_id)
    if found is not None and now - found <= HINT_TTL_SECONDS:
        return False
    if _owner_has_more_than(owner_id, EXACT_SEARCH_MAX_MEMORIES):
        if len(_BIG_OWNERS) >= OPEN_COUNTS_KEPT:
            _BIG_OWNERS.clear()
        _BIG_OWNERS[owner_id] = now
        return False
    _BIG_OWNERS.pop(owner_id, None)
    return True


def _owner_has_more_than(owner_id: int, count: int) -> bool:
    # Counts the owner's memories on the owner_id index alone (index-only scan, at
    # most count + 1 entries): a cheap size test that ignores the gate on purpose,
    # since evaluating the gate is the expensive part. Plain SQL: the ORM's sliced
    # count costs more to build than to run.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {Memory._meta.db_table} WHERE owner_id = %s LIMIT %s) mine",
            [owner_id, count + 1],
        )
        return cursor.fetchone()[0] > count


# --- the maintained gate count: a hint for choosing the strategy, never the gate ------
#
# MemoryGate.blocked_count is kept exact by database triggers (migration 0004), but
# nothing here TRUSTS it to be: it only narrows where the search looks. Every
# query below still runs on `scope`, which for agents is agent_visible_memories,
# whose NOT EXISTS decides what an agent may see. So if a count were ever wrong:
# - too high (a memory counted as blocked that is not): the search skips that
#   memory, and the result is too small;
# - too low (counted as open while blocked): the memory is a candidate, and the
#   NOT EXISTS gate removes it.
# Never a leak, in either direction.
#
# MemoryGate.indexed (migration 0009) cannot leak either: among the rows the count
# calls open it only decides which index a row is found through, the agents' HNSW
# index (indexed) or the exact search beside it (not indexed, _unindexed_open_neighbours);
# both statements run on the same `visible` gate. A wrong flag can only make a row
# found the slower way, or (a row marked indexed that the index lacks) missed by the
# search: a result too small, never a blocked memory shown.


# Past EXACT_CANDIDATES_MAX the open count only tunes the index scan (how wide,
# whether the owner is thin in the index), so the count up to OPEN_ANN_SPARSE_MAX
# (~1.2 ms at 15,000) is kept per owner for HINT_TTL_SECONDS. owner id ->
# (monotonic time read, count); emptied when it holds OPEN_COUNTS_KEPT owners.
_OPEN_COUNTS: dict[int, tuple[float, int]] = {}
OPEN_COUNTS_KEPT = 10_000
# Owners counted with more open memories than this (twice the exact path's bound)
# are not counted again on every search while their count is recent (_open_hint).
OPEN_HINT_TRUSTED_ABOVE = 2 * EXACT_CANDIDATES_MAX


# Whether the owner (%s) has open, embedded rows not in the agents' index yet: a probe of
# memory_gate_unindexed_idx, usually empty.
_BACKLOG_PROBE = (
    f"SELECT 1 FROM {MemoryGate._meta.db_table} WHERE owner_id = %s AND blocked_count = 0 "
    "AND NOT indexed AND embedding IS NOT NULL"
)


def _open_hint(owner_id: int) -> tuple[int, bool | None]:
    """(the owner's open memories counted as far as the strategy needs, whether any wait for the index).

    The second: whether some open, embedded rows are not in the agents' index yet
    (memory_gate_unindexed_idx), asked in the same statement as the count so the
    search need not probe for them apart (_unindexed_open_neighbours); None when
    not asked (below).

    Exact up to EXACT_CANDIDATES_MAX, counted on every call (~0.2 ms): whether
    none are open, and whether the exact path over the open ones applies, is
    always today's answer. Above that, the count up to OPEN_ANN_SPARSE_MAX may be
    up to HINT_TTL_SECONDS old (never below EXACT_CANDIDATES_MAX + 1): it only
    sets the index scan's width and bounds, and the gate in every statement
    decides what passes, so an old count can cost recall or time, never show a
    blocked memory or hide one a grant opened (found exactly until indexed).
    An owner whose count, that recent, was more than OPEN_HINT_TRUSTED_ABOVE is
    not counted again until it is older, and nothing is asked: the probe for
    unindexed rows is left to the statement that sets the index scan's settings
    (_set_hnsw), the only path such an owner's search needs it on (a statement
    less, ~0.3-0.5 ms). Revoking thousands at once then leaves the index path
    searching for up to HINT_TTL_SECONDS where the exact one would now do: more
    work, the same answer.
    """
    gate = MemoryGate._meta.db_table
    now = time.monotonic()
    cached = _OPEN_COUNTS.get(owner_id)
    if cached is not None and now - cached[0] <= HINT_TTL_SECONDS and cached[1] > OPEN_HINT_TRUSTED_ABOVE:
        return cached[1], None
    with connection.cursor() as cursor:
        # The count as _count_open_memories makes it; EXISTS on the (usually empty) partial index.
        cursor.execute(
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM {gate} "
            f"  WHERE owner_id = %s AND blocked_count = 0 LIMIT %s) open), EXISTS ({_BACKLOG_PROBE})",
            [owner_id, EXACT_CANDIDATES_MAX + 1, owner_id],
        )
        few, unindexed = cursor.fetchone()
    if few <= EXACT_CANDIDATES_MAX:
        return few, unindexed
    if cached is None or now - cached[0] > HINT_TTL_SECONDS:
        if len(_OPEN_COUNTS) >= OPEN_COUNTS_KEPT:
            _OPEN_COUNTS.clear()
        counted = _count_open_memories(owner_id, max(EXACT_CANDIDATES_MAX, OPEN_ANN_SPARSE_MAX))
        cached = _OPEN_COUNTS[owner_id] = (now, counted)
    return max(cached[1], EXACT_CANDIDATES_MAX + 1), unindexed


# owner id -> (monotonic time read, whether the owner keeps more than
# OPEN_ANN_SPARSE_GATED memories per open one), as _OPEN_COUNTS.
_SPARSE_OWNERS: dict[int, tuple[float, bool]] = {}


def _sparse_in_own_journal(owner_id: int, open_count: int) -> bool:
    """Whether the owner's open memories are few (OPEN_ANN_SPARSE_MAX) and most of the journal is gated.

    Then the nearest open memories to a query often lie past gated ones, far
    from the query, near-ties only a near-exhaustive index scan finds: those
    owners are searched exactly (_open_candidates_neighbours), which costs less.
    An owner with few memories, most of them open, is searched through the index
    as a big one is. The size test (at most OPEN_ANN_SPARSE_GATED x open_count
    memories) is kept HINT_TTL_SECONDS: a hint for the strategy, never for what passes.
    """
    if open_count > OPEN_ANN_SPARSE_MAX:
        return False
    now = time.monotonic()
    cached = _SPARSE_OWNERS.get(owner_id)
    if cached is None or now - cached[0] > HINT_TTL_SECONDS:
        if len(_SPARSE_OWNERS) >= OPEN_COUNTS_KEPT:
            _SPARSE_OWNERS.clear()
        gated = _owner_has_more_than(owner_id, OPEN_ANN_SPARSE_GATED * open_count)
        cached = _SPARSE_OWNERS[owner_id] = (now, gated)
    return cached[1]


def _count_open_memories(owner_id: int, cap: int) -> int:
    """How many of the owner's memories nothing blocks (per the hint), counting at most cap + 1.

    An index-only scan of memory_gate_open_idx that stops after cap + 1 entries
    (~0.2 ms for 2,000, ~2 ms for 20,000 here). With a cap of 0 (LIMIT 1) the
    planner may bet that a sequential scan finds a match at once when other
    owners have many open memories, and lose the bet when this owner has none
    (~12 ms at 200k memories, measured); with caps in the thousands the index
    wins clearly.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {MemoryGate._meta.db_table} "
            "WHERE owner_id = %s AND blocked_count = 0 LIMIT %s) open",
            [owner_id, cap + 1],
        )
        return cursor.fetchone()[0]


# How many entries the agents' index holds, per the planner's statistics
# (pg_class.reltuples, kept by VACUUM and ANALYZE): a hint for the strategy, read
# again after HINT_TTL_SECONDS. (monotonic time read, entries)
HINT_TTL_SECONDS = 60.0
# The bounded scan is expected to meet at least this many times the rows it must
# fetch, or the owner counts as thin in the index (_thin_in_the_index).
THIN_SHARE_MARGIN = 2
_RELATION_ROWS: dict[str, tuple[float, int]] = {}


def forget_hints() -> None:
    """Drop the per-process statistics hints (owner shares, relation sizes, open counts) and
    the copies of open vectors (memories/open_vectors.py).

    For what changes the data wholesale and measures at once (the benchmark
    after it flips a gated fraction; each test): a server reads them again after
    HINT_TTL_SECONDS anyway.
    """
    for hints in hint_caches():
        hints.clear()


def hint_caches() -> tuple[list | dict, ...]:
    """The per-process hints, each a list or dict: what forget_hints empties, and what a
    benchmark that searches two databases in turn keeps apart (bench_isolation)."""
    return (
        _OWNER_SHARES,
        _RELATION_ROWS,
        _OPEN_COUNTS,
        _SPARSE_OWNERS,
        _BIG_OWNERS,
        _CIRCLE_OPEN_COUNTS,
        *open_vectors.caches(),
    )


def _relation_rows(name: str) -> int:
    """Rows of a table or entries of an index per pg_class.reltuples, re-read after HINT_TTL_SECONDS."""
    now = time.monotonic()
    cached = _RELATION_ROWS.get(name)
    if cached is None or now - cached[0] > HINT_TTL_SECONDS:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass(%s)", [name]
            )
            row = cursor.fetchone()
        cached = _RELATION_ROWS[name] = (now, row[0] if row else 0)
    return cached[1]


def _open_index_rows() -> int:
    return _relation_rows("memory_gate_open_hnsw")


def _thin_in_the_index(open_count: int, fetch: int) -> bool:
    """Whether the owner's open memories are too thin a share of the agents' index for its bounded scan.

    The index holds every owner's open memories; a scan meets this owner's at the
    rate open_count / entries, so finding `fetch` of them takes about
    fetch x entries / open_count visits. When twice that (THIN_SHARE_MARGIN)
    passes the scan's bound (OPEN_ANN_MAX_SCAN_TUPLES) the scan would come back
    short and pay the exact search after it (measured in a table of a million: an
    owner with 2,500 open memories 34 ms p50 that way, 6 ms exact at once; one
    with 4,500 still 41 ms with no margin), so owners with at most
    EXACT_FALLBACK_MAX_MEMORIES open go to the exact search at once: ranked on the
    half-precision copies, ~0.7 µs per open memory, whatever the table holds.
    """
    if open_count > EXACT_FALLBACK_MAX_MEMORIES:
        return False
    return THIN_SHARE_MARGIN * fetch * _open_index_rows() > OPEN_ANN_MAX_SCAN_TUPLES * open_count


def _among_open_memories(scope: QuerySet[Memory], owner_id: int) -> QuerySet[Memory]:
    """`scope` narrowed to memories the hint calls open (the gate in `scope` still applies).

    `id = ANY(ARRAY(subquery))` rather than `IN (subquery)`: PostgreSQL then reads
    the candidate ids once and probes the primary key in id order (one sorted
    index pass) instead of planning a join that may hash every participant.
    """
    return scope.filter(
        RawSQL(
            f"{Memory._meta.db_table}.id = ANY(ARRAY(SELECT memory_id FROM {MemoryGate._meta.db_table} "
            "WHERE owner_id = %s AND blocked_count = 0))",
            [owner_id],
            output_field=BooleanField(),
        )
    )


def _nearest_neighbours(
    scope: QuerySet[Memory] | Callable[[], QuerySet[Memory]],
    embedding: Sequence[float],
    *,
    owner_id: int,
    limit: int,
    gated: bool = False,
    open_count: int | None = None,
    unindexed: bool | None = True,
    visible: tuple[str, list] | None = None,
    small_owner: bool | None = None,
) -> list[tuple[uuid.UUID, float]]:
    """The `limit` memories of `scope` nearest to `embedding`: [(id, cosine distance)].

    Must run inside a transaction (the hnsw.* settings are SET LOCAL). `scope` is
    an owner's scope (memory_scope), or a function building it when some path
    needs it (`visible`, its SQL compiled already, serves the agents' index path
    without it), with the gate inside it for agents, who pass
    gated=True so the maintained count can pick the strategy first (`open_count`:
    from _open_hint(owner_id), when the caller has it already; `unindexed`: whether
    open rows may wait for the agents' index, the second half of _open_hint:
    None when it left that to the index scan's settings, True when not known):

    - Nothing open per the count: no memory can pass, answer [] at once (the
      zero-match case does not walk an index to prove it).
    - At most EXACT_CANDIDATES_MAX open, few open beside many gated
      (_sparse_in_own_journal), or too thin a share of the agents' index for its
      bounded scan (_thin_in_the_index): exact search among just those
      (_open_candidates_neighbours). Independent of other owners' data.
    - Small owner (<= EXACT_SEARCH_MAX_MEMORIES): exact search with the gate and
      filters in the WHERE clause. Exactly right, ~1 µs per memory, and independent
      of other owners' data.
    - Otherwise HNSW with an iterative relaxed-order scan, over-fetch and re-sort:
      for agents the index of open memories (nearly every entry it yields passes
      the gate, however much of the journal is gated), for the owner the index of
      all memories. ef_search and max_scan_tuples bounded on purpose.
    - If that comes back short (matches too sparse for the bounded scan, e.g. a
      narrow filter) and at most EXACT_FALLBACK_MAX_MEMORIES memories are in play
      (open ones for agents), finish with exact search so LIMIT k returns k
      whenever k matches exist. Beyond that the shorter answer stands rather than
      pay a full exact scan per query; the benchmark reports rows against asked.

    `small_owner`: whether the owner has at most EXACT_SEARCH_MAX_MEMORIES
    memories, when the caller knows already (memory_search asks once for both sides).
    """

    def scoped() -> QuerySet[Memory]:
        return scope() if callable(scope) else scope

    def scope_sql() -> tuple[str, list]:
        return visible or _scope_sql(scoped())

    if gated:
        if open_count is None:
            open_count, unindexed = _open_hint(owner_id)
        if open_count == 0:
            return []
        if (
            open_count <= EXACT_CANDIDATES_MAX
            or _sparse_in_own_journal(owner_id, open_count)
            or _thin_in_the_index(open_count, limit * ANN_OVERFETCH)
        ):
            return _open_candidates_neighbours(
                scope_sql(), embedding, owner_id=owner_id, limit=limit, open_count=open_count
            )

    # (For agents, more open memories than EXACT_SEARCH_MAX_MEMORIES already means
    # a bigger owner: skip the size query.)
    if small_owner is None and (not gated or open_count <= EXACT_SEARCH_MAX_MEMORIES):
        small_owner = _small_owner(owner_id)
    if (not gated or open_count <= EXACT_SEARCH_MAX_MEMORIES) and small_owner:
        return _visible_neighbours(scope_sql(), embedding, limit, exact=True)
    if gated:
        fetch = limit * ANN_OVERFETCH
        rows = _open_index_neighbours(
            scope_sql(),
            embedding,
            owner_id=owner_id,
            fetch=fetch,
            ef_search=max(math.ceil(fetch * OPEN_ANN_EF_PER_FETCHED), OPEN_ANN_EF_SEARCH),
            unindexed=unindexed,
        )[:limit]
        if len(rows) < limit:
            # The open memories in play, counted on.
            fallback = EXACT_FALLBACK_MAX_MEMORIES
            if _count_open_memories(owner_id, fallback) <= fallback:
                return _exact_neighbours(_among_open_memories(scoped(), owner_id), embedding, limit)
        return rows
    fetch = limit * ANN_OVERFETCH
    if _thin_in_the_table(owner_id, fetch):
        return _visible_neighbours(scope_sql(), embedding, limit, exact=True)
    rows = _approximate_neighbours(scope_sql(), embedding, fetch, owner_id=owner_id)[:limit]
    if len(rows) < limit and not _owner_has_more_than(owner_id, EXACT_FALLBACK_MAX_MEMORIES):
        return _visible_neighbours(scope_sql(), embedding, limit, exact=True)
    return rows


# --- full-text side ----------------------------------------------------------------


def _candidates_sql(candidates: QuerySet[Memory]) -> tuple[str, list]:
    sql, params = (
        candidates.order_by().values_list("pk", "search_vector", "occurred_at").query.sql_with_params()
    )
    return sql, list(params)


def _owner_candidates_sql(owner_id: int, *, agents: bool, small_owner: bool = False) -> tuple[str, list]:
    """The owner's memories (no filters) as _text_matches candidates; `agents`: only those that may pass.

    Read from MemoryText, the narrow copy of what the full-text side needs
    (~400-byte rows instead of ~2 KB memory rows that carry the embedding).

    `agents`: the rows whose count lets them pass (agents_open, the hint the
    gate's count keeps), through memory_text_open_gin, an index of (owner,
    words) over those rows only: a common word's candidates are then all
    rankable, whatever share of the owner's memories is gated.

    `small_owner` (at most EXACT_SEARCH_MAX_MEMORIES memories, the owner's or
    agents' searches): the owner's rows are read through the owner_id index and
    the query checked on each (OFFSET 0 keeps the match condition outside, so
    no full-text index is used). Left to itself the planner intersects the
    owner's rows with a full-text index's matches over every owner (a GIN
    index's entries for a word list every owner's memories that hold it): a
    common word matches tens of thousands of other people's memories (3-5 ms in
    a table of a million for an owner of 1,000, against ~1 ms for reading the
    owner's own rows), so a small owner's search would cost what the whole
    table holds.
    """
    table = MemoryText._meta.db_table
    sql = (
        f"SELECT {table}.memory_id, {table}.search_vector, {table}.occurred_at "
        f"FROM {table} WHERE {table}.owner_id = %s"
    )
    if agents:
        sql = f"{sql} AND {table}.agents_open"
    return (f"{sql} OFFSET 0" if small_owner else sql), [owner_id]


def _circle_candidates_sql(circle_id: uuid.UUID | str, viewers: list[int]) -> tuple[str, list]:
    """The circle's shares that may pass for `viewers` (the hint), as _text_matches candidates.

    Read from the shares' own copies of the text vector: the open ones through
    memory_share_open_text (a GIN index over the shares whose count lets them
    pass, so a common word's matches are all rankable), then the viewers' own
    blocked ones (the owner always sees their own). The gate, in `visible`, decides.
    """
    table = _share_table()
    return (
        f"SELECT s.memory_id, s.search_vector, s.occurred_at FROM {table} s "
        "WHERE s.circle_id = %s AND s.blocked_count = 0 "
        "UNION ALL "
        f"SELECT s.memory_id, s.search_vector, s.occurred_at FROM {table} s "
        "WHERE s.owner_id = ANY(%s) AND s.circle_id = %s AND s.blocked_count > 0",
        [str(circle_id), viewers, str(circle_id)],
    )


def _text_matches(
    visible: tuple[str, list],
    query: str,
    fetch: int,
    *,
    candidates: tuple[str, list],
    embedding: Sequence[float] | None = None,
    prepared: bool = False,
    one_word_exact: bool = False,
) -> list[tuple[uuid.UUID, float, float | None]]:
    """The `fetch` best full-text matches that pass `visible`: [(id, ts_rank, cosine distance or None)].

    One statement, bounded whatever the query matches:
    1. `candidates` (SQL selecting id, search_vector, occurred_at: a cheap
       superset of `visible` without the gate, the owner's memories and the
       filters, or a circle's shares that may pass: _owner_candidates_sql reads
       MemoryText's narrow rows (for agents the open ones), _circle_candidates_sql
       the shares' copies,
       _candidates_sql a filtered queryset's) matching the query, read from a GIN index, at most
       TEXT_CANDIDATES_MAX of them: a query so broad that it matches more (one
       common word) ranks only that many, because reading and ranking tens of
       thousands of text vectors is what made the full-text side slow (70 ms
       p95 at 100k);
    2. ranked by ts_rank, best first (then newest, then id);
    3. each probed against `visible` (the gate: the compiled scope, a LATERAL
       subquery per candidate) in rank order, stopping at `fetch` that pass, so
       the gate runs for the few that win rather than for every match.

    `one_word_exact` (candidates from _owner_candidates_sql, whose table has the
    indexes of migration 0013): a query of one word is ranked exactly instead,
    however many memories hold it. ts_rank (no weights, no normalisation) ranks
    a one-word query by how often the word occurs and by nothing else, so the
    order is: the memories holding the word at least twice (memory_text_repeated_gin),
    ranked; then the ones holding it once, all ranked the same, newest first
    (memory_text_recent, read until enough are found; for agents memory_text_open_recent,
    the rows that can pass, so a word few open memories hold is not looked for among
    every gated row). A query of several words
    is ranked as above. Which branch runs is decided when the statement is planned
    (numnode of the parsed query: a constant once the words are known).

    The distance to `embedding` (for the relevance cut-off and the fusion) is
    read for the passing rows only. websearch syntax: plain words are ANDed,
    "quoted phrases" and -exclusions work, and no input makes the parser raise.
    """
    candidate_sql, candidate_params = candidates
    visible_sql, visible_params = visible
    distance = "passing.distance" if embedding is not None else "NULL::float8"
    candidate_from = f"({candidate_sql}) AS candidate (id, search_vector, occurred_at), q"

    def ranked_branch(condition: str) -> tuple[str, list]:
        return (
            "SELECT matched.id, matched.rank, row_number() OVER ("
            "  ORDER BY matched.rank DESC, matched.occurred_at DESC, matched.id) AS position "
            "FROM ("
            "  SELECT candidate.id, candidate.occurred_at,"
            "    ts_rank(candidate.search_vector, q.query) AS rank"
            f"  FROM {candidate_from}"
            f"  WHERE {condition} LIMIT %s"
            ") matched",
            [*candidate_params, TEXT_CANDIDATES_MAX],
        )

    if one_word_exact:
        several, several_params = ranked_branch(
            "numnode(q.query) <> 1 AND candidate.search_vector @@ q.query"
        )
        repeated, repeated_params = ranked_branch(
            "numnode(q.query) = 1 AND memories_repeated_lexemes(candidate.search_vector) @@ q.query"
        )
        # Holding the word once: all ranked the same, so newest first, after every
        # ranked one (positions from TEXT_CANDIDATES_MAX + 1). That rank is a word's
        # without positions ('x'::tsvector): the same for every word, below any memory
        # holding it twice (one ts_rank a row, cheaper than the index's function).
        # `fetch` four times over: a candidate the gate refuses (for agents, one
        # superseded or expired, or a stale agents_open; an owner sees all of theirs)
        # is skipped and the next taken. Only if more than three in four of a
        # word's newest matches were refused would the text side come back short.
        once_rank = "ts_rank('x'::tsvector, 'x'::tsquery)"
        once = (
            "SELECT once.id, once.rank, %s + row_number() OVER ("
            "  ORDER BY once.occurred_at DESC, once.id) AS position "
            "FROM ("
            f"  SELECT candidate.id, candidate.occurred_at, {once_rank} AS rank"
            f"  FROM {candidate_from}"
            "  WHERE numnode(q.query) = 1 AND candidate.search_vector @@ q.query"
            f"    AND ts_rank(candidate.search_vector, q.query) <= {once_rank}"
            "  ORDER BY candidate.occurred_at DESC, candidate.id LIMIT %s"
            ") once"
        )
        # UNION ALL runs its branches in order and each comes out in its own order
        # (no parallel workers in a search): the probes below see the exact ranking.
        ranked_sql = f"{several} UNION ALL {repeated} UNION ALL {once}"
        ranked_params = [
            *several_params,
            *repeated_params,
            TEXT_CANDIDATES_MAX,
            *candidate_params,
            4 * fetch,
        ]
    else:
        branch, branch_params = ranked_branch("candidate.search_vector @@ q.query")
        ranked_sql, ranked_params = f"{branch} ORDER BY position", branch_params
    # No ORDER BY outside: the LATERAL probes run in the order `ranked` comes in and
    # the LIMIT stops them (`position` keeps that order here).
    sql, params = (
        # NOT MATERIALIZED: referenced by every branch, and still folded into each as a
        # constant when planned (the index conditions, numnode, the word's statistics).
        "WITH q AS NOT MATERIALIZED (SELECT websearch_to_tsquery('english'::regconfig, %s) AS query) "
        f"SELECT ranked.id, ranked.rank, {distance}, ranked.position "
        f"FROM ({ranked_sql}) ranked "
        "CROSS JOIN LATERAL ("
        "  SELECT visible.embedding <=> %s::vector AS distance"
        f"  FROM ({visible_sql}) AS visible (id, embedding) WHERE visible.id = ranked.id LIMIT 1"
        ") passing "
        "LIMIT %s",
        [
            query,
            *ranked_params,
            _vector_text(embedding) if embedding is not None else None,
            *visible_params,
            fetch,
        ],
    )
    # `prepared`: a circle's, always read through the shares' partial GIN indexes, so a
    # generic plan fits every query (owners' and agents' are left to custom plans: a
    # common word's best plan differs from a rare one's).
    rows = sorted(_fetch_prepared(sql, params, prepared=prepared), key=lambda row: row[3])
    return [(memory_id, rank, distance) for memory_id, rank, distance, _ in rows]


# --- public selectors ----------------------------------------------------------------


def _check_limit(limit: int) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError({"limit": f"Limit must be a whole number from 1 to {MAX_LIMIT}."})


def _check_embedding(embedding: Sequence[float]) -> list[float]:
    values = [float(value) for value in embedding]
    if len(values) != EMBEDDING_DIMENSIONS:
        raise ValidationError({"query_embedding": f"An embedding has {EMBEDDING_DIMENSIONS} numbers."})
    return values


def _embed_query(query: str) -> list[float] | None:
    try:
        from memories.embeddings import embed_text

        return embed_text(query)
    except Exception:
        # The model is an enrichment, not a dependency of search: when it cannot load
        # (not installed, out of memory, broken files) full text still answers.
        logger.warning("Query embedding unavailable; searching by full text only.", exc_info=True)
        return None


# What _load reads: a memory without its vectors (384 numbers to parse, and the text
# vector: never shown), each participant with its person, the source person.
_LOADED_MEMORY_FIELDS = tuple(
    field for field in Memory._meta.concrete_fields if field.attname not in ("embedding", "search_vector")
)
_PARTICIPANT_FIELDS = tuple(MemoryParticipant._meta.concrete_fields)
_PERSON_FIELDS = tuple(Person._meta.concrete_fields)
# Where each row of _load holds the memory's id, the participant's and the person's.
_LOADED_ID = [field.attname for field in _LOADED_MEMORY_FIELDS].index("id")
_PARTICIPANT_ID = [field.attname for field in _PARTICIPANT_FIELDS].index("id")
_PERSON_ID = [field.attname for field in _PERSON_FIELDS].index("id")


def _load(visible: tuple[str, list], ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Memory]:
    """The memories `ids` that pass `visible`, as _with_people would load them (participants, people).

    Loaded through the same scope, in the same transaction: a memory is only ever
    returned through the gate that ranked it. Plain SQL and Model.from_db, with
    the related objects put where select_related and prefetch_related put them
    (tests/memories/test_retrieval.py compares the two): building the ORM's two
    statements cost more than the search they finish (~2 ms of ~4). One statement
    for the memories and their participants (a row per participant, the memory's
    columns repeated): the participants of a memory the gate refuses are never read.
    """
    if not ids:
        return {}
    visible_sql, visible_params = visible
    memories: dict[uuid.UUID, Memory] = {}
    participants: dict[uuid.UUID, list[MemoryParticipant]] = {}
    people: dict[uuid.UUID, Person] = {}
    memory_width, participant_width = len(_LOADED_MEMORY_FIELDS), len(_PARTICIPANT_FIELDS)
    search = getattr(_SEARCH_SETTINGS, "current", None)
    if search is not None:
        # A search's last statement: its transaction's COMMIT goes with it (_SearchSettings).
        search.commit_with_next()
    # Prepared: the same statement every search, whose plan is an index lookup of ten ids.
    rows = _fetch_prepared(
        f"SELECT {columns('memory', _LOADED_MEMORY_FIELDS)}, {columns('participant', _PARTICIPANT_FIELDS)}, "
        f"{columns('person', _PERSON_FIELDS)} FROM {Memory._meta.db_table} memory "
        f"LEFT JOIN ({MemoryParticipant._meta.db_table} participant "
        f"  JOIN {Person._meta.db_table} person ON person.id = participant.person_id) "
        "ON participant.memory_id = memory.id "
        "WHERE memory.id = ANY(%s) AND EXISTS ("
        f"SELECT 1 FROM ({visible_sql}) AS visible (id, embedding) WHERE visible.id = memory.id) "
        "ORDER BY person.display_name, participant.id",
        [list(ids), *visible_params],
    )
    with connection.cursor() as cursor:
        for row in rows:
            memory = memories.get(row[_LOADED_ID])
            if memory is None:
                memory = instance(Memory, _LOADED_MEMORY_FIELDS, row[:memory_width])
                memories[memory.pk] = memory
                participants[memory.pk] = []
            participant_row = row[memory_width : memory_width + participant_width]
            if participant_row[_PARTICIPANT_ID] is None:  # nobody in it
                continue
            participant = instance(MemoryParticipant, _PARTICIPANT_FIELDS, participant_row)
            person_row = row[memory_width + participant_width :]
            person = people.get(person_row[_PERSON_ID]) or instance(Person, _PERSON_FIELDS, person_row)
            people[person.pk] = person
            MemoryParticipant.person.field.set_cached_value(participant, person)
            MemoryParticipant.memory.field.set_cached_value(participant, memory)
            participants[memory.pk].append(participant)
        sources = {memory.source_person_id for memory in memories.values()} - {None} - people.keys()
        if sources:
            cursor.execute(
                f"SELECT {columns('person', _PERSON_FIELDS)} FROM {Person._meta.db_table} person "
                "WHERE person.id = ANY(%s)",
                [list(sources)],
            )
            for row in cursor.fetchall():
                person = instance(Person, _PERSON_FIELDS, row)
                people[person.pk] = person
    for memory in memories.values():
        Memory.source_person.field.set_cached_value(memory, people.get(memory.source_person_id))
        # What prefetch_related("participants") leaves: the related manager's
        # queryset with its result filled in.
        loaded = memory.participants.all()
        loaded._result_cache = participants[memory.pk]
        loaded._prefetch_done = True
        memory._prefetched_objects_cache = {"participants": loaded}
    return memories


def memory_search(
    owner: AbstractBaseUser | int,
    query: str,
    *,
    respect_consent: bool = False,
    limit: int = 10,
    filters: MemoryFilters | None = None,
    query_embedding: Sequence[float] | None = None,
    relevance: RelevanceCutoff | None = None,
    may_read_sensitive: bool = False,
) -> list[SearchHit]:
    """Hybrid search of the owner's memories, relevant ones only, best first.

    Agents must pass respect_consent=True, and their clearance for sensitive
    memories as `may_read_sensitive`. `query_embedding` skips embedding the
    query (callers that already have it; tests; the benchmark). `relevance`:
    the cut-off (RelevanceCutoff); search_relevance() when left out.
    """
    _check_limit(limit)
    query = (query or "").strip()
    if not query:
        return []
    open_count, unindexed = _open_hint(_owner_id(owner)) if respect_consent else (None, True)
    if open_count == 0:
        # Per the maintained count nothing of this owner's can pass the gate: skip
        # both searches (and embedding the query). A hint only: see above.
        return []
    embedding = _check_embedding(query_embedding) if query_embedding is not None else _embed_query(query)
    depth = max(limit, FUSION_DEPTH_MIN)
    owner_id = _owner_id(owner)
    # Few open memories (per the hint): a filtered search looks for text matches among
    # them alone (unfiltered, the agents' candidates are always the open ones).
    open_only = respect_consent and open_count <= EXACT_CANDIDATES_MAX
    with _search_transaction():
        # Unfiltered: the owner's text copy, whose indexes also rank one word exactly.
        unfiltered = filters is None or filters == MemoryFilters()
        # The owner's size, asked once for both sides, and only where it decides
        # something: agents with more open memories than that are not small; with
        # few, an unfiltered search asks for its text side (a small owner's own rows),
        # a filtered one (None) leaves the vector side to ask if it needs to.
        small_owner: bool | None = None
        if open_count is not None and open_count > EXACT_SEARCH_MAX_MEMORIES:
            small_owner = False
        elif not respect_consent or unfiltered:
            small_owner = _small_owner(owner_id)

        def scope() -> QuerySet[Memory]:
            return memory_apply_filters(
                memory_scope(owner, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive),
                filters,
            )

        if unfiltered:
            visible = _compiled_scope(
                owner_id, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive
            )
            candidates = _owner_candidates_sql(
                owner_id, agents=respect_consent, small_owner=bool(small_owner)
            )
        else:
            visible = _scope_sql(scope())
            owner_filtered = memory_apply_filters(memory_scope(owner, respect_consent=False), filters)
            candidates = _candidates_sql(
                _among_open_memories(owner_filtered, owner_id) if open_only else owner_filtered
            )
        text_side = functools.partial(
            _text_matches,
            visible,
            query,
            depth,
            candidates=candidates,
            embedding=embedding,
            # A small owner's matches are no more than TEXT_CANDIDATES_MAX: all ranked
            # anyway, from the owner's own rows (the one-word branches would compute
            # the repeated words of each: ~9 ms for 1,000 rows).
            one_word_exact=unfiltered
            and not (small_owner and EXACT_SEARCH_MAX_MEMORIES <= TEXT_CANDIDATES_MAX),
        )
        # The full-text side on the helper's connection while this one runs the vector side.
        text = _SIDE_RUNNER.start(text_side) if embedding is not None else text_side
        nearest = (
            _nearest_neighbours(
                scope,
                embedding,
                owner_id=owner_id,
                limit=depth,
                gated=respect_consent,
                open_count=open_count,
                unindexed=unindexed,
                visible=visible,
                small_owner=small_owner,
            )
            if embedding is not None
            else []
        )
        return _fused_hits(visible, nearest, text(), limit, relevance=relevance or search_relevance())


def _relevant(
    candidates: Iterable[uuid.UUID],
    *,
    similarity: dict[uuid.UUID, float],
    text_rank: dict[uuid.UUID, float],
    relevance: RelevanceCutoff,
) -> set[uuid.UUID]:
    """The candidates `relevance` keeps (see RelevanceCutoff): only ever a subset of `candidates`."""
    kept: set[uuid.UUID] = set()
    for memory_id in candidates:
        meaning = similarity.get(memory_id)
        if memory_id in text_rank and (meaning is None or meaning >= relevance.min_text_similarity):
            kept.add(memory_id)
        elif meaning is not None and meaning >= relevance.min_similarity:
            kept.add(memory_id)
    if relevance.margin is not None:
        known = [similarity[memory_id] for memory_id in kept if memory_id in similarity]
        if known:
            floor = max(known) - relevance.margin
            kept = {memory_id for memory_id in kept if similarity.get(memory_id, floor) >= floor}
    return kept


def _fused_hits(
    visible: tuple[str, list],
    nearest: list[tuple[uuid.UUID, float]],
    text: list[tuple[uuid.UUID, float, float | None]],
    limit: int,
    *,
    relevance: RelevanceCutoff,
) -> list[SearchHit]:
    """Reciprocal rank fusion of both sides, relevant ones only, best first, loaded through `visible`.

    The relevance cut-off runs here, on the candidates the gated searches
    returned and before `limit`: it only removes candidates (a memory it keeps
    was found through `visible`, and is loaded through it again), so "nothing
    matches" is an empty list rather than the nearest memories however far.
    """
    fused: dict[uuid.UUID, float] = {}
    for ranking in (nearest, text):
        for position, (memory_id, *_) in enumerate(ranking, start=1):
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (RRF_K + position)
    similarity = {memory_id: 1.0 - distance for memory_id, distance in nearest}
    # The full-text side read the distance of its matches (None: not embedded yet).
    similarity |= {
        memory_id: 1.0 - distance
        for memory_id, _, distance in text
        if distance is not None and memory_id not in similarity
    }
    text_rank = {memory_id: rank for memory_id, rank, _ in text}
    relevant = _relevant(fused, similarity=similarity, text_rank=text_rank, relevance=relevance)
    best = sorted(
        relevant, key=lambda memory_id: (-fused[memory_id], -similarity.get(memory_id, -1.0), str(memory_id))
    )[:limit]
    memories = _load(visible, best)
    return [
        SearchHit(
            memory=memories[memory_id],
            score=fused[memory_id],
            similarity=similarity.get(memory_id),
            text_rank=text_rank.get(memory_id),
        )
        for memory_id in best
        if memory_id in memories
    ]


# --- highlighting the words that matched ------------------------------------------

# ts_headline marks the matches with these (Unicode private-use characters, which
# journal text has no reason to hold); the marked text is then escaped piece by
# piece and only our own <mark> tags are added, so no memory text is ever HTML.
# A stray marker in a body can at worst highlight the wrong words.
_MATCH_START, _MATCH_STOP = "\ue000", "\ue001"


def _marked_html(headline: str) -> str:
    pieces: list[str] = []
    inside = False
    for token in re.split(f"([{_MATCH_START}{_MATCH_STOP}])", headline):
        if token == _MATCH_START and not inside:
            pieces.append("<mark>")
            inside = True
        elif token == _MATCH_STOP and inside:
            pieces.append("</mark>")
            inside = False
        elif token not in (_MATCH_START, _MATCH_STOP):
            pieces.append(escape(token))
    if inside:
        pieces.append("</mark>")
    return "".join(pieces)


def memory_search_highlights(
    owner: AbstractBaseUser | int, query: str, memory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, SafeString]:
    """For the owner's own results: an excerpt of each body with the query's matching words in <mark>.

    Only memories whose words matched get one (a memory found by meaning alone has
    nothing to mark). Escaped HTML, safe to render. Owner-only: it reads the owner's
    memories that a search already returned, and decides no visibility.
    """
    query = (query or "").strip()
    if not query or not memory_ids:
        return {}
    tsquery = SearchQuery(query, config="english", search_type="websearch")
    rows = (
        Memory.objects.filter(owner_id=_owner_id(owner), pk__in=list(memory_ids), search_vector=tsquery)
        .annotate(
            headline=SearchHeadline(
                "body",
                tsquery,
                config="english",
                start_sel=_MATCH_START,
                stop_sel=_MATCH_STOP,
                max_words=30,
                min_words=12,
            )
        )
        .values_list("pk", "headline")
    )
    return {
        memory_id: mark_safe(_marked_html(headline))  # every piece of memory text escaped above
        for memory_id, headline in rows
        if _MATCH_START in headline
    }


# --- circles: the members' case of the gate ------------------------------------------

# A circle's search first counts the shares that can pass for its viewers
# (MemoryShare.blocked_count = 0, or the viewer's own), a hint kept by triggers
# like the agents' count: up to this many, exact search among them, ranked on the
# shares' half-precision copies and re-ranked at full precision through the gate;
# more: the HNSW index of open shares (memory_share_open_hnsw).
CIRCLE_EXACT_CANDIDATES_MAX = 2_000
CIRCLE_COUNT_CAP = 20_000
CIRCLE_ANN_EF_SEARCH = 60
CIRCLE_ANN_SPARSE_EF_SEARCH = 200
CIRCLE_ANN_MAX_SCAN_TUPLES = 6_000


def _share_table() -> str:
    from circles.models import MemoryShare

    return MemoryShare._meta.db_table


def _circle_open_shares(circle_id: uuid.UUID | str, viewers: list[int]) -> tuple[str, list]:
    """SQL condition (on alias s) for the circle's shares that may pass for these viewers, per the
    hint: the open ones, and the viewers' own (the owner always sees their own)."""
    branches = _circle_open_share_branches(circle_id, viewers)
    return (
        " OR ".join(f"({condition})" for condition, _ in branches),
        [param for _, params in branches for param in params],
    )


def _circle_open_count(circle_id: uuid.UUID | str, viewers: list[int], cap: int) -> tuple[int, int]:
    """(open shares counted to cap + 1 on memory_share_open_idx, the viewers' own blocked shares)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM {_share_table()} s "
            "WHERE s.circle_id = %s AND s.blocked_count = 0 LIMIT %s) open), "
            f"(SELECT count(*) FROM {_share_table()} s "
            "WHERE s.owner_id = ANY(%s) AND s.circle_id = %s AND s.blocked_count > 0)",
            [str(circle_id), cap + 1, viewers, str(circle_id)],
        )
        return cursor.fetchone()


def _among_open_shares(
    scope: QuerySet[Memory], circle_id: uuid.UUID | str, viewers: list[int]
) -> QuerySet[Memory]:
    condition, params = _circle_open_shares(circle_id, viewers)
    return scope.filter(
        RawSQL(
            f"{Memory._meta.db_table}.id = ANY(ARRAY(SELECT s.memory_id FROM {_share_table()} s "
            f"WHERE {condition}))",
            params,
            output_field=BooleanField(),
        )
    )


# Past CIRCLE_EXACT_CANDIDATES_MAX a circle's open count only sets the index scan's
# width (sparse or not), so the count up to OPEN_ANN_SPARSE_MAX is kept per circle
# for HINT_TTL_SECONDS, as _OPEN_COUNTS for owners: circle id -> (monotonic time, count).
_CIRCLE_OPEN_COUNTS: dict[str, tuple[float, int]] = {}


def _circle_open_hint(circle_id: uuid.UUID | str) -> int:
    """The circle's open shares counted to OPEN_ANN_SPARSE_MAX + 1, up to HINT_TTL_SECONDS old.

    Asked only past CIRCLE_EXACT_CANDIDATES_MAX (the count up to there is asked on
    every search); it chooses the index scan's width and nothing else.
    """
    now = time.monotonic()
    cached = _CIRCLE_OPEN_COUNTS.get(str(circle_id))
    if cached is None or now - cached[0] > HINT_TTL_SECONDS:
        if len(_CIRCLE_OPEN_COUNTS) >= OPEN_COUNTS_KEPT:
            _CIRCLE_OPEN_COUNTS.clear()
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {_share_table()} s "
                "WHERE s.circle_id = %s AND s.blocked_count = 0 LIMIT %s) open",
                [str(circle_id), OPEN_ANN_SPARSE_MAX + 1],
            )
            cached = _CIRCLE_OPEN_COUNTS[str(circle_id)] = (now, cursor.fetchone()[0])
    return cached[1]


def _circle_open_share_branches(circle_id: uuid.UUID | str, viewers: list[int]) -> list[tuple[str, list]]:
    """The circle's shares that may pass for these viewers (_circle_open_shares) as two
    conditions on alias s, one per index: the open shares (memory_share_open_vectors, read
    index-only with their vectors) and the viewers' own blocked ones
    (memory_share_blocked_owner_idx). Disjoint: blocked_count = 0 and > 0."""
    return [
        ("s.circle_id = %s AND s.blocked_count = 0", [str(circle_id)]),
        ("s.owner_id = ANY(%s) AND s.circle_id = %s AND s.blocked_count > 0", [viewers, str(circle_id)]),
    ]


def _ranked_shares(
    visible: tuple[str, list],
    vector: str,
    shares: list[tuple[str, list]],
    *,
    limit: int,
    count: int,
) -> list[tuple[uuid.UUID, float]]:
    """Exact search among the `count` shares `shares` selects (disjoint SQL conditions on alias s).

    As _open_candidates_neighbours for the agents: ranked by the shares'
    half-precision copies (a sort: + 0), the nearest few per result asked go
    through `visible` at full precision, in one statement; when the gate leaves
    fewer than `limit` of those and there were more, all of them instead. Each
    condition is its own branch of a UNION ALL, so each reads its own partial index
    (with one condition OR-ed, the circle's every share was read from the table:
    20,000 rows, ~8 ms, for 2,000 open).
    """
    fetch = limit * EXACT_CANDIDATES_OVERFETCH
    rows = _ranked_through(visible, vector, _nearest_shares_sql(shares, vector, fetch), limit)
    if len(rows) < limit and count > fetch:
        params = [param for _, branch_params in shares for param in branch_params]
        every = " UNION ALL ".join(
            f"SELECT s.memory_id FROM {_share_table()} s WHERE {condition}" for condition, _ in shares
        )
        rows = _ranked_through(visible, vector, (f"ARRAY({every})", params), limit)
    return rows


def _nearest_shares_sql(shares: list[tuple[str, list]], vector: str, fetch: int) -> tuple[str, list]:
    """An SQL array of the `fetch` shares nearest to `vector` by their half-precision copies,
    among those the conditions select (each a branch: its own index), with its params."""
    params = [param for _, branch_params in shares for param in branch_params]
    rows_sql = " UNION ALL ".join(
        f"SELECT s.memory_id, s.embedding FROM {_share_table()} s "
        f"WHERE {condition} AND s.embedding IS NOT NULL"
        for condition, _ in shares
    )
    return (
        f"ARRAY(SELECT candidate.memory_id FROM ({rows_sql}) AS candidate "
        "ORDER BY (candidate.embedding <=> %s::halfvec) + 0, candidate.memory_id LIMIT %s)",
        [*params, vector, fetch],
    )


def _circle_neighbours(
    scope: Callable[[], QuerySet[Memory]],
    embedding: Sequence[float],
    *,
    visible: tuple[str, list],
    circle_id: uuid.UUID | str,
    viewers: list[int],
    limit: int,
) -> list[tuple[uuid.UUID, float]]:
    """Nearest memories among what the circle's viewers may see (`scope`: circle_visible_memories).

    `scope` builds the gate's queryset for the last resort; `visible` is its SQL,
    compiled already (_compiled_circle_scope), for every other statement.

    Strategy from the maintained share count (a hint; `visible` still decides):
    none open → []; few → exact among them; many → the open shares' HNSW index,
    with the viewers' own blocked shares (the owner always sees their own)
    searched exactly beside it, in SQL (an owner's own circle can hold thousands);
    a short answer is filled by exact search when the circle is not too big.
    """
    # Counted only as far as the choice needs (a count to 20,000 costs more than the search).
    open_count, own_blocked = _circle_open_count(circle_id, viewers, CIRCLE_EXACT_CANDIDATES_MAX)
    if open_count + own_blocked == 0:
        return []
    vector = _vector_text(embedding)
    if open_count + own_blocked <= CIRCLE_EXACT_CANDIDATES_MAX:
        return _ranked_shares(
            visible,
            vector,
            _circle_open_share_branches(circle_id, viewers),
            limit=limit,
            count=open_count + own_blocked,
        )
    sparse = _circle_open_hint(circle_id) <= OPEN_ANN_SPARSE_MAX
    _set_hnsw(
        ef_search=max(limit * ANN_OVERFETCH, CIRCLE_ANN_SPARSE_EF_SEARCH if sparse else CIRCLE_ANN_EF_SEARCH),
        max_scan_tuples=CIRCLE_ANN_MAX_SCAN_TUPLES,
    )
    scope_sql, scope_params = visible
    rows: list[tuple[uuid.UUID, float]] = []
    if open_count:
        # Prepared (planned once per connection; planning the circle's gate cost ~1.2 ms):
        # the plan walks the open shares' index whatever the vector, and the LIMIT is
        # written in (an int) so that a generic plan knows it.
        rows = _fetch_prepared(
            f"SELECT visible.id, visible.embedding <=> %s::vector "
            f"FROM ({scope_sql}) AS visible (id, embedding) "
            f"JOIN {_share_table()} s ON s.memory_id = visible.id "
            "WHERE s.circle_id = %s AND s.blocked_count = 0 AND s.embedding IS NOT NULL "
            "AND visible.embedding IS NOT NULL "
            f"ORDER BY s.embedding <=> %s::halfvec LIMIT {int(limit * ANN_OVERFETCH)}",
            [vector, *scope_params, str(circle_id), vector],
        )
    if own_blocked:
        # The viewers' own shares that the count calls blocked (the owner always sees
        # their own): not in the open shares' index, ranked exactly beside it.
        rows += _ranked_shares(
            visible,
            vector,
            _circle_open_share_branches(circle_id, viewers)[1:],
            limit=limit,
            count=own_blocked,
        )
    rows = _by_distance(rows)[:limit]
    # A short answer from a circle small enough to search whole.
    if (
        len(rows) < limit
        and sum(_circle_open_count(circle_id, viewers, CIRCLE_COUNT_CAP)) <= CIRCLE_COUNT_CAP
    ):
        return _exact_neighbours(_among_open_shares(scope(), circle_id, viewers), embedding, limit)
    return rows


def circle_memory_search(
    circle_id: uuid.UUID | str,
    viewer_ids: Iterable[int],
    query: str,
    *,
    limit: int = 10,
    query_embedding: Sequence[float] | None = None,
    for_agent: bool = False,
    read_by_several: bool = False,
    may_read_sensitive: bool = False,
    relevance: RelevanceCutoff | None = None,
) -> list[SearchHit]:
    """Hybrid search of what every viewer in `viewer_ids` may see in the circle: relevant, best first.

    `for_agent`, `read_by_several` and `may_read_sensitive` as for circle_visible_memories; `relevance`
    as for memory_search.
    """
    _check_limit(limit)
    query = (query or "").strip()
    if not query:
        return []
    embedding = _check_embedding(query_embedding) if query_embedding is not None else _embed_query(query)
    depth = max(limit, FUSION_DEPTH_MIN)
    with _search_transaction():
        viewers = sorted({int(viewer_id) for viewer_id in viewer_ids})
        if not viewers:
            return []

        def scope() -> QuerySet[Memory]:
            return circle_visible_memories(
                circle_id,
                viewers,
                for_agent=for_agent,
                read_by_several=read_by_several,
                may_read_sensitive=may_read_sensitive,
            )

        visible = _compiled_circle_scope(
            circle_id,
            viewers,
            for_agent=for_agent,
            read_by_several=read_by_several,
            may_read_sensitive=may_read_sensitive,
        )
        # The circle's shares are the candidates (the gate, in `visible`, decides).
        text_side = functools.partial(
            _text_matches,
            visible,
            query,
            depth,
            candidates=_circle_candidates_sql(circle_id, viewers),
            embedding=embedding,
            prepared=True,
        )
        # The full-text side on the helper's connection while this one runs the vector side.
        text = _SIDE_RUNNER.start(text_side) if embedding is not None else text_side
        nearest = (
            _circle_neighbours(
                scope, embedding, visible=visible, circle_id=circle_id, viewers=viewers, limit=depth
            )
            if embedding is not None
            else []
        )
        return _fused_hits(visible, nearest, text(), limit, relevance=relevance or search_relevance())


def circle_memory_timeline(
    circle_id: uuid.UUID | str,
    viewer_ids: Iterable[int],
    *,
    for_agent: bool = False,
    may_read_sensitive: bool = False,
) -> QuerySet[Memory]:
    """What the viewers may see in the circle, newest first, with people and owners loaded.

    Walks the circle's shares newest first (memory_share_timeline, the share's
    copy of the memory's date) and skips, by the maintained count, those that
    cannot pass before the gate is evaluated: a first page reads a few dozen
    shares, not all of them. The gate (circle_visible_memories) still decides.
    """
    viewers = sorted({int(viewer_id) for viewer_id in viewer_ids})
    scope = circle_visible_memories(
        circle_id, viewers, for_agent=for_agent, may_read_sensitive=may_read_sensitive
    ).filter(Q(shares__circle_id=circle_id) & (Q(shares__blocked_count=0) | Q(shares__owner_id__in=viewers)))
    return (
        _with_people(scope)
        .select_related("owner")
        .defer("embedding", "search_vector")  # never shown; reading and parsing them costs
        .annotate(shared_occurred_at=F("shares__occurred_at"))
        .order_by(F("shared_occurred_at").desc(), "-created_at", "pk")
    )


def _anchor_embedding(memory: Memory) -> list[float] | None:
    # Read fresh: the worker may have stored (or an edit cleared) the vector since
    # this instance was loaded.
    embedding = Memory.objects.filter(pk=memory.pk).values_list("embedding", flat=True).first()
    return None if embedding is None else list(embedding)


def memory_similar(
    memory: Memory, *, respect_consent: bool = False, limit: int = 10, may_read_sensitive: bool = False
) -> list[SearchHit]:
    """The memories nearest in meaning to `memory` (never itself), nearest first.

    For agents: nothing at all when `memory` itself does not pass the gate, and
    only gated memories otherwise. A memory not yet embedded has no neighbours.
    """
    _check_limit(limit)
    with _search_transaction():
        scope = memory_scope(
            memory.owner_id, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive
        )
        if respect_consent and not scope.filter(pk=memory.pk).exists():
            return []
        embedding = _anchor_embedding(memory)
        if embedding is None:
            return []
        others = scope.exclude(pk=memory.pk)
        nearest = _nearest_neighbours(
            others, embedding, owner_id=memory.owner_id, limit=limit, gated=respect_consent
        )
        memories = _load(_scope_sql(others), [memory_id for memory_id, _ in nearest])
    return [
        SearchHit(memory=memories[memory_id], score=1.0 - distance, similarity=1.0 - distance)
        for memory_id, distance in nearest
        if memory_id in memories
    ]


def _stored_edges(memory: Memory, scope: QuerySet[Memory], limit: int) -> list[tuple[uuid.UUID, str, float]]:
    edges = (
        MemoryEdge.objects.filter(owner_id=memory.owner_id)
        .filter(Q(source_id=memory.pk) | Q(target_id=memory.pk))
        .order_by("kind", "-weight")
        .values_list("source_id", "target_id", "kind", "weight")
    )
    related: dict[tuple[uuid.UUID, str], float] = {}
    for source_id, target_id, kind, weight in edges:
        other = target_id if source_id == memory.pk else source_id
        related[(other, kind)] = max(weight, related.get((other, kind), weight))
    return [(other, kind, weight) for (other, kind), weight in related.items()][
        : limit * len(EdgeKind.values)
    ]


def _gated_relations(memory: Memory, scope: QuerySet[Memory]) -> list[tuple[uuid.UUID, str, float]]:
    # Computed live from gated memories only, with the workers' rules. The stored
    # edges are not used for agents: they are each memory's top few over ALL its
    # neighbours, so even filtered to gated targets, how many remain would hint
    # that ungated ones were nearer.
    relations: list[tuple[uuid.UUID, str, float]] = []
    embedding = _anchor_embedding(memory)
    others = scope.exclude(pk=memory.pk)
    if embedding is not None:
        minimum = settings.MEMORY_EDGES_SIMILAR_MIN_SIMILARITY
        for memory_id, distance in _nearest_neighbours(
            others,
            embedding,
            owner_id=memory.owner_id,
            limit=settings.MEMORY_EDGES_SIMILAR_LIMIT,
            gated=True,
        ):
            if 1.0 - distance >= minimum:
                relations.append((memory_id, EdgeKind.SIMILAR, 1.0 - distance))
    # The owner's Self person would link every memory to every other: not a signal.
    people = MemoryParticipant.objects.filter(memory_id=memory.pk, person__is_self=False).values("person_id")
    shared = (
        others.filter(participants__person_id__in=people)
        .annotate(shared=Count("participants"))
        .order_by("-shared", "-occurred_at", "pk")
        .values_list("pk", "shared")[: settings.MEMORY_EDGES_SHARED_PERSON_LIMIT]
    )
    relations += [(memory_id, EdgeKind.SHARED_PERSON, float(count)) for memory_id, count in shared]
    return relations


def memory_related(
    memory: Memory, *, respect_consent: bool = False, limit: int = 20, may_read_sensitive: bool = False
) -> list[RelatedHit]:
    """Memories linked to `memory`: similar in meaning, sharing a person, superseding.

    Owner view: the edges the workers computed, either direction. Agent view: an
    empty list when `memory` itself does not pass the gate; otherwise relations
    computed live among gated memories only (see _gated_relations).
    """
    _check_limit(limit)
    with _search_transaction():
        scope = memory_scope(
            memory.owner_id, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive
        )
        if respect_consent:
            if not scope.filter(pk=memory.pk).exists():
                return []
            relations = _gated_relations(memory, scope)
        else:
            relations = _stored_edges(memory, scope, limit)
        memories = _load(_scope_sql(scope), [memory_id for memory_id, _, _ in relations])
    hits = [
        RelatedHit(memory=memories[memory_id], kind=kind, weight=weight)
        for memory_id, kind, weight in relations
        if memory_id in memories
    ]
    return hits[:limit]
