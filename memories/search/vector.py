"""The vector side's strategy: which path finds a search's nearest memories (_nearest_neighbours).

The hints (hints.py) choose among the paths of knn.py (exact; HNSW over all the owner's
memories) and knn_open.py (the agents' open-gate index; exact among the open rows, from
the kept copies when there are some); a short answer is filled by exact search when few
enough memories are in play. Every path searches `scope`, or `visible`, its compiled SQL:
the gate (memories/gate.py) inside it decides what passes.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence

from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from memories.gate import _scope_sql
from memories.models import Memory, MemoryGate
from memories.search import hints, knn, knn_open, settings


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
            open_count, unindexed = hints._open_hint(owner_id)
        if open_count == 0:
            return []
        if (
            open_count <= settings.EXACT_CANDIDATES_MAX
            or hints._sparse_in_own_journal(owner_id, open_count)
            or hints._thin_in_the_index(open_count, limit * settings.ANN_OVERFETCH)
        ):
            return knn_open._open_candidates_neighbours(
                scope_sql(), embedding, owner_id=owner_id, limit=limit, open_count=open_count
            )

    # (For agents, more open memories than EXACT_SEARCH_MAX_MEMORIES already means
    # a bigger owner: skip the size query.)
    if small_owner is None and (not gated or open_count <= settings.EXACT_SEARCH_MAX_MEMORIES):
        small_owner = hints._small_owner(owner_id)
    if (not gated or open_count <= settings.EXACT_SEARCH_MAX_MEMORIES) and small_owner:
        return knn._visible_neighbours(scope_sql(), embedding, limit, exact=True)
    if gated:
        fetch = limit * settings.ANN_OVERFETCH
        rows = knn_open._open_index_neighbours(
            scope_sql(),
            embedding,
            owner_id=owner_id,
            fetch=fetch,
            ef_search=max(math.ceil(fetch * settings.OPEN_ANN_EF_PER_FETCHED), settings.OPEN_ANN_EF_SEARCH),
            unindexed=unindexed,
        )[:limit]
        if len(rows) < limit:
            # The open memories in play, counted on.
            fallback = settings.EXACT_FALLBACK_MAX_MEMORIES
            if hints._count_open_memories(owner_id, fallback) <= fallback:
                return knn._exact_neighbours(_among_open_memories(scoped(), owner_id), embedding, limit)
        return rows
    fetch = limit * settings.ANN_OVERFETCH
    if knn._thin_in_the_table(owner_id, fetch):
        return knn._visible_neighbours(scope_sql(), embedding, limit, exact=True)
    rows = knn._approximate_neighbours(scope_sql(), embedding, fetch, owner_id=owner_id)[:limit]
    if len(rows) < limit and not hints._owner_has_more_than(owner_id, settings.EXACT_FALLBACK_MAX_MEMORIES):
        return knn._visible_neighbours(scope_sql(), embedding, limit, exact=True)
    return rows
