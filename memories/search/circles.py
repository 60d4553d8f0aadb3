"""Circle search: the members' (and their agents') hybrid search and timeline, over the circle's shares.

circle_visible_memories (memories/gate.py) decides what the viewers may see; here the
maintained share count (MemoryShare.blocked_count, a hint kept by triggers) chooses where
to look: none open, exact among the few, or the open shares' HNSW index with the viewers'
own blocked shares beside it. Every statement ranks through the gate's compiled scope.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterable, Sequence

from django.db import connection
from django.db.models import BooleanField, F, Q, QuerySet
from django.db.models.expressions import RawSQL

from memories.gate import _compiled_circle_scope, circle_visible_memories
from memories.models import Memory
from memories.search import fulltext, fusion, hints, hybrid, knn, settings, statements


def _circle_candidates_sql(circle_id: uuid.UUID | str, viewers: list[int]) -> tuple[str, list]:
    """The circle's shares that may pass for `viewers` (the hint), as _text_matches candidates.

    Read from the shares' own copies of the text vector: the open ones through
    memory_share_open_text (a GIN index over the shares whose count lets them
    pass, so a common word's matches are all rankable), then the viewers' own
    blocked ones (the owner always sees their own). The gate, in `visible`, decides.
    """
    table = hints._share_table()
    return (
        f"SELECT s.memory_id, s.search_vector, s.occurred_at FROM {table} s "
        "WHERE s.circle_id = %s AND s.blocked_count = 0 "
        "UNION ALL "
        f"SELECT s.memory_id, s.search_vector, s.occurred_at FROM {table} s "
        "WHERE s.owner_id = ANY(%s) AND s.circle_id = %s AND s.blocked_count > 0",
        [str(circle_id), viewers, str(circle_id)],
    )


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
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM {hints._share_table()} s "
            "WHERE s.circle_id = %s AND s.blocked_count = 0 LIMIT %s) open), "
            f"(SELECT count(*) FROM {hints._share_table()} s "
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
            f"{Memory._meta.db_table}.id = ANY(ARRAY(SELECT s.memory_id FROM {hints._share_table()} s "
            f"WHERE {condition}))",
            params,
            output_field=BooleanField(),
        )
    )


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
    fetch = limit * settings.EXACT_CANDIDATES_OVERFETCH
    rows = knn._ranked_through(visible, vector, _nearest_shares_sql(shares, vector, fetch), limit)
    if len(rows) < limit and count > fetch:
        params = [param for _, branch_params in shares for param in branch_params]
        every = " UNION ALL ".join(
            f"SELECT s.memory_id FROM {hints._share_table()} s WHERE {condition}" for condition, _ in shares
        )
        rows = knn._ranked_through(visible, vector, (f"ARRAY({every})", params), limit)
    return rows


def _nearest_shares_sql(shares: list[tuple[str, list]], vector: str, fetch: int) -> tuple[str, list]:
    """An SQL array of the `fetch` shares nearest to `vector` by their half-precision copies,
    among those the conditions select (each a branch: its own index), with its params."""
    params = [param for _, branch_params in shares for param in branch_params]
    rows_sql = " UNION ALL ".join(
        f"SELECT s.memory_id, s.embedding FROM {hints._share_table()} s "
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
    open_count, own_blocked = _circle_open_count(circle_id, viewers, settings.CIRCLE_EXACT_CANDIDATES_MAX)
    if open_count + own_blocked == 0:
        return []
    vector = knn._vector_text(embedding)
    if open_count + own_blocked <= settings.CIRCLE_EXACT_CANDIDATES_MAX:
        return _ranked_shares(
            visible,
            vector,
            _circle_open_share_branches(circle_id, viewers),
            limit=limit,
            count=open_count + own_blocked,
        )
    sparse = hints._circle_open_hint(circle_id) <= settings.OPEN_ANN_SPARSE_MAX
    statements._set_hnsw(
        ef_search=max(
            limit * settings.ANN_OVERFETCH,
            settings.CIRCLE_ANN_SPARSE_EF_SEARCH if sparse else settings.CIRCLE_ANN_EF_SEARCH,
        ),
        max_scan_tuples=settings.CIRCLE_ANN_MAX_SCAN_TUPLES,
        # On its generic plan, with sorts off: PostgreSQL kept planning it anew at every
        # search (~2.2 ms through the circle's gate, for ~2.7 ms of execution: its custom
        # plans looked cheaper to it), and a generic plan knows no circle's size, which
        # without sorts cannot turn into reading a circle's shares and sorting them.
        sort=False,
        generic=True,
    )
    scope_sql, scope_params = visible
    rows: list[tuple[uuid.UUID, float]] = []
    if open_count:
        # Prepared (planned once per connection, see above): the plan walks the open shares'
        # index whatever the vector, and the LIMIT is written in (an int) so that a generic
        # plan knows it.
        rows = statements._fetch_prepared(
            f"SELECT visible.id, visible.embedding <=> %s::vector "
            f"FROM ({scope_sql}) AS visible (id, embedding) "
            f"JOIN {hints._share_table()} s ON s.memory_id = visible.id "
            "WHERE s.circle_id = %s AND s.blocked_count = 0 AND s.embedding IS NOT NULL "
            "AND visible.embedding IS NOT NULL "
            f"ORDER BY s.embedding <=> %s::halfvec LIMIT {int(limit * settings.ANN_OVERFETCH)}",
            [vector, *scope_params, str(circle_id), vector],
        )
    statements._settings_back("enable_sort", "plan_cache_mode")
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
    rows = knn._by_distance(rows)[:limit]
    # A short answer from a circle small enough to search whole.
    if (
        len(rows) < limit
        and sum(_circle_open_count(circle_id, viewers, settings.CIRCLE_COUNT_CAP))
        <= settings.CIRCLE_COUNT_CAP
    ):
        return knn._exact_neighbours(_among_open_shares(scope(), circle_id, viewers), embedding, limit)
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
    relevance: fusion.RelevanceCutoff | None = None,
) -> list[fusion.SearchHit]:
    """Hybrid search of what every viewer in `viewer_ids` may see in the circle: relevant, best first.

    `for_agent`, `read_by_several` and `may_read_sensitive` as for circle_visible_memories; `relevance`
    as for memory_search.
    """
    hybrid._check_limit(limit)
    query = (query or "").strip()
    if not query:
        return []
    embedding = (
        hybrid._check_embedding(query_embedding)
        if query_embedding is not None
        else hybrid._embed_query(query)
    )
    depth = max(limit, settings.FUSION_DEPTH_MIN)
    with statements._search_transaction():
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
            fulltext._text_matches,
            visible,
            query,
            depth,
            candidates=_circle_candidates_sql(circle_id, viewers),
            embedding=embedding,
            prepared=True,
        )
        # The full-text side on the helper's connection while this one runs the vector side.
        text = statements._SIDE_RUNNER.start(text_side) if embedding is not None else text_side
        nearest = (
            _circle_neighbours(
                scope, embedding, visible=visible, circle_id=circle_id, viewers=viewers, limit=depth
            )
            if embedding is not None
            else []
        )
        return fusion._fused_hits(
            visible, nearest, text(), limit, relevance=relevance or fusion.search_relevance()
        )


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
        fusion._with_people(scope)
        .select_related("owner")
        .defer("embedding", "search_vector")  # never shown; reading and parsing them costs
        .annotate(shared_occurred_at=F("shares__occurred_at"))
        .order_by(F("shared_occurred_at").desc(), "-created_at", "pk")
    )
