"""The agents' vector paths, over the gate rows the maintained count calls open.

- _open_index_neighbours: HNSW over the open rows (memory_gate_open_hnsw), with the rows a
  grant opened since the index was last brought up to date searched exactly beside it
  (_unindexed_open_neighbours).
- _open_candidates_neighbours: exact search among the open rows, for owners with few of
  them (or few beside many gated ones), first from the process's kept copy of their
  vectors (_kept_open_neighbours, memories/open_vectors.py) when it has a whole one.

The count only narrows where to look: every candidate is ranked through `visible`, the
gate's compiled scope (memories/gate.py), which decides what passes.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from django.db import connection

from memories import open_vectors
from memories.gate import _compiled_scope
from memories.models import MemoryGate
from memories.search import knn, settings, statements


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
    Both with the planner's sorts off: a journal that is most of the table (one
    person's instance) otherwise had its ~10,000 open rows read from
    memory_gate_open_idx and sorted, where the HNSW index walks to the nearest few
    (tests/memories/test_plans.py: 9,904 rows read against 44); the search's other
    statements get them back (_settings_back).

    The index holds the open rows that are `indexed`; the ones a grant opened
    since the last memories.index_opened_gates run are searched exactly beside it
    (_unindexed_open_neighbours) and merged by distance, so a memory a grant opens
    is found on the very next query. `unindexed=False`: the caller has just
    asked (_open_hint) and there are none, so that search is skipped; None: not
    asked yet, so the statement that sets the scan's settings asks.
    """
    scope_sql, scope_params = visible
    by_id = settings.OPEN_ANN_PLANNED_ONCE and scope_sql == _compiled_scope(owner_id, respect_consent=True)[0]
    candidates = fetch + settings.OPEN_ANN_SPARE_CANDIDATES
    backlog = statements._set_hnsw(
        # At least as wide as the candidates taken: a LIMIT past ef_search makes the scan
        # resume for the rest (a second pass: +50% of its pages, measured).
        ef_search=max(ef_search, candidates) if by_id else ef_search,
        max_scan_tuples=settings.OPEN_ANN_MAX_SCAN_TUPLES,
        backlog_of=owner_id if unindexed is None else None,
        sort=False,
    )
    vector = knn._vector_text(embedding)
    rows: list[tuple[uuid.UUID, float]] = []
    if by_id:
        gate = MemoryGate._meta.db_table
        nearest_open = (
            f"ARRAY(SELECT memory_id FROM {gate} WHERE owner_id + 0 = %s AND blocked_count = 0 AND indexed "
            "AND embedding IS NOT NULL ORDER BY embedding <=> %s::halfvec "
            # Written in (an int): a generic plan knows the LIMIT, and scans the index for it.
            f"LIMIT {int(candidates)})"
        )
        rows = knn._ranked_through(visible, vector, (nearest_open, [owner_id, vector]), fetch)
    if len(rows) < fetch:
        # Bound on the server and planned each time, as _visible_neighbours.
        rows = statements._fetch_prepared(
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
    statements._settings_back("enable_sort")
    if unindexed:
        rows += _unindexed_open_neighbours(visible, vector, owner_id=owner_id, fetch=fetch)
    return knn._by_distance(rows)[:fetch]


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
    candidates_max = fetch * settings.EXACT_CANDIDATES_OVERFETCH
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT memory_id FROM {gate} WHERE {unindexed} "
            f"ORDER BY ({gate}.embedding <=> %s::halfvec) + 0, memory_id LIMIT %s",
            [owner_id, vector, candidates_max + 1],
        )
        candidates = [row[0] for row in cursor.fetchall()]
    if not candidates:
        return []
    rows = knn._ranked_through(visible, vector, ("%s::uuid[]", [candidates[:candidates_max]]), fetch)
    if len(rows) < fetch and len(candidates) > candidates_max:
        every = f"ARRAY(SELECT memory_id FROM {gate} WHERE {unindexed})"
        rows = knn._ranked_through(visible, vector, (every, [owner_id]), fetch)
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
    fetch = limit * settings.EXACT_CANDIDATES_OVERFETCH
    gate = MemoryGate._meta.db_table
    vector = knn._vector_text(embedding)
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
        rows = knn._ranked_through(
            visible, vector, (f"ARRAY({nearest_open})", [owner_id, vector, fetch]), limit
        )
    if len(rows) < limit and open_count > fetch:
        rows = knn._ranked_through(visible, vector, (f"ARRAY({open_rows})", [owner_id]), limit)
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
    search_settings = getattr(statements._SEARCH_SETTINGS, "current", None)
    if search_settings is None or not search_settings.outermost:
        return None
    # None until a copy is read: the reader thread reads it while this search ranks in SQL.
    copy = open_vectors.obtain(owner_id, background=statements._on_the_configured_database())
    if copy is None:
        return None
    scope_sql, scope_params = visible
    widths = [limit * settings.EXACT_CANDIDATES_OVERFETCH]
    if scope_sql == _compiled_scope(owner_id, respect_consent=True)[0]:
        widths.insert(0, limit + settings.KEPT_SPARE_CANDIDATES)
    rows: list[tuple[uuid.UUID, float]] = []
    for width in widths:
        # The flag row first (its id NULL), then the ranked rows; one statement, one snapshot.
        answer = statements._fetch_prepared(
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
