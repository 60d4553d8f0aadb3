"""The hints a search chooses its strategy by: never the gate.

The owner's size and share of the table, the maintained open counts (MemoryGate, the
circles' MemoryShare), the sizes of tables and indexes. Each is kept per process for at
most settings.HINT_TTL_SECONDS, or read afresh on every search where the answer must be
today's. They choose which path runs, how wide a scan is and how many candidates are
ranked; every statement still runs on the gate's scope, so a wrong hint can cost time or
recall, never show a memory the gate refuses or hide one it allows for long (see "the
maintained gate count" below). forget_hints empties them; hint_caches names them.
"""

from __future__ import annotations

import time
import uuid

from django.db import connection

from memories import open_vectors
from memories.models import Memory, MemoryGate
from memories.search import settings

# Each owner's share of memories_memory per the planner's statistics (the most
# common owner_id values and their frequencies, kept by ANALYZE), read again after
# HINT_TTL_SECONDS: a hint for ef_search, never for what is shown.
# [(monotonic time read, {owner_id: share}, share of an owner not listed)]
_OWNER_SHARES: list[tuple[float, dict[int, float], float]] = []


def _owner_share(owner_id: int) -> float:
    """The owner's estimated fraction of all memories; 1.0 when the statistics say nothing."""
    now = time.monotonic()
    if not _OWNER_SHARES or now - _OWNER_SHARES[0][0] > settings.HINT_TTL_SECONDS:
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
    if found is not None and now - found <= settings.HINT_TTL_SECONDS:
        return False
    if _owner_has_more_than(owner_id, settings.EXACT_SEARCH_MAX_MEMORIES):
        if len(_BIG_OWNERS) >= settings.OPEN_COUNTS_KEPT:
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
# search statement still runs on `scope`, which for agents is agent_visible_memories,
# whose NOT EXISTS decides what an agent may see. So if a count were ever wrong:
# - too high (a memory counted as blocked that is not): the search skips that
#   memory, and the result is too small;
# - too low (counted as open while blocked): the memory is a candidate, and the
#   NOT EXISTS gate removes it.
# Never a leak, in either direction.
#
# MemoryGate.indexed (migration 0009) cannot leak either: among the rows the count
# calls open it only decides which index a row is found through, the agents' HNSW
# index (indexed) or the exact search beside it (not indexed, knn_open._unindexed_open_neighbours);
# both statements run on the same `visible` gate. A wrong flag can only make a row
# found the slower way, or (a row marked indexed that the index lacks) missed by the
# search: a result too small, never a blocked memory shown.


# Past EXACT_CANDIDATES_MAX the open count only tunes the index scan (how wide,
# whether the owner is thin in the index), so the count up to OPEN_ANN_SPARSE_MAX
# (~1.2 ms at 15,000) is kept per owner for HINT_TTL_SECONDS. owner id ->
# (monotonic time read, count); emptied when it holds OPEN_COUNTS_KEPT owners.
_OPEN_COUNTS: dict[int, tuple[float, int]] = {}

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
    if (
        cached is not None
        and now - cached[0] <= settings.HINT_TTL_SECONDS
        and cached[1] > settings.OPEN_HINT_TRUSTED_ABOVE
    ):
        return cached[1], None
    with connection.cursor() as cursor:
        # The count as _count_open_memories makes it; EXISTS on the (usually empty) partial index.
        cursor.execute(
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM {gate} "
            f"  WHERE owner_id = %s AND blocked_count = 0 LIMIT %s) open), EXISTS ({_BACKLOG_PROBE})",
            [owner_id, settings.EXACT_CANDIDATES_MAX + 1, owner_id],
        )
        few, unindexed = cursor.fetchone()
    if few <= settings.EXACT_CANDIDATES_MAX:
        return few, unindexed
    if cached is None or now - cached[0] > settings.HINT_TTL_SECONDS:
        if len(_OPEN_COUNTS) >= settings.OPEN_COUNTS_KEPT:
            _OPEN_COUNTS.clear()
        counted = _count_open_memories(
            owner_id, max(settings.EXACT_CANDIDATES_MAX, settings.OPEN_ANN_SPARSE_MAX)
        )
        cached = _OPEN_COUNTS[owner_id] = (now, counted)
    return max(cached[1], settings.EXACT_CANDIDATES_MAX + 1), unindexed


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
    if open_count > settings.OPEN_ANN_SPARSE_MAX:
        return False
    now = time.monotonic()
    cached = _SPARSE_OWNERS.get(owner_id)
    if cached is None or now - cached[0] > settings.HINT_TTL_SECONDS:
        if len(_SPARSE_OWNERS) >= settings.OPEN_COUNTS_KEPT:
            _SPARSE_OWNERS.clear()
        gated = _owner_has_more_than(owner_id, settings.OPEN_ANN_SPARSE_GATED * open_count)
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


# How many entries a table or index holds, per the planner's statistics
# (pg_class.reltuples, kept by VACUUM and ANALYZE): a hint for the strategy, read
# again after HINT_TTL_SECONDS. name -> (monotonic time read, rows)
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
    if cached is None or now - cached[0] > settings.HINT_TTL_SECONDS:
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
    if open_count > settings.EXACT_FALLBACK_MAX_MEMORIES:
        return False
    return (
        settings.THIN_SHARE_MARGIN * fetch * _open_index_rows()
        > settings.OPEN_ANN_MAX_SCAN_TUPLES * open_count
    )


def _share_table() -> str:
    """The circles' shares (circles/ builds on memories: imported when first asked)."""
    from circles.models import MemoryShare

    return MemoryShare._meta.db_table


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
    if cached is None or now - cached[0] > settings.HINT_TTL_SECONDS:
        if len(_CIRCLE_OPEN_COUNTS) >= settings.OPEN_COUNTS_KEPT:
            _CIRCLE_OPEN_COUNTS.clear()
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM {_share_table()} s "
                "WHERE s.circle_id = %s AND s.blocked_count = 0 LIMIT %s) open",
                [str(circle_id), settings.OPEN_ANN_SPARSE_MAX + 1],
            )
            cached = _CIRCLE_OPEN_COUNTS[str(circle_id)] = (now, cursor.fetchone()[0])
    return cached[1]
