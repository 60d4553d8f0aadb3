"""The vector side's primitives and the owner's paths: exact search, HNSW over all memories.

- _visible_neighbours: the nearest rows of `visible` (the gate's compiled scope with the
  filters), exact or through memory_embedding_hnsw; _exact_neighbours over an ORM scope.
- _approximate_neighbours: the owner's HNSW path, ef_search widened as the owner's share
  of the table shrinks; _thin_in_the_table: when even the widest scan would come back short.
- _ranked_through: the nearest of a few candidate ids that pass `visible`, at full precision.

Which path a search takes is decided in vector.py; the agents' paths are in knn_open.py.
Every statement is SQL around `visible`: this module chooses how to look, the gate what passes.
"""

from __future__ import annotations

import functools
import math
import uuid
from collections.abc import Sequence

import numpy
from django.core.exceptions import EmptyResultSet
from django.db.models import QuerySet

from memories.gate import _scope_sql
from memories.models import Memory
from memories.search import hints, settings, statements


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
    rows = statements._fetch_prepared(
        f"SELECT visible.id, {distance} FROM ({scope_sql}) AS visible (id, embedding) "
        f"WHERE visible.embedding IS NOT NULL ORDER BY {order} LIMIT %s",
        [vector, *scope_params, vector, fetch],
        prepared=False,
    )
    return rows if exact else _by_distance(rows)


def _exact_neighbours(
    scope: QuerySet[Memory], embedding: Sequence[float], fetch: int
) -> list[tuple[uuid.UUID, float]]:
    """Exact search over an ORM scope (the circle paths, the fallbacks, the benches' references)."""
    try:
        visible = _scope_sql(scope)
    except EmptyResultSet:  # a scope the ORM knows matches nothing (pk__in=[])
        return []
    return _visible_neighbours(visible, embedding, fetch, exact=True)


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
    widened = math.ceil(fetch * settings.ANN_EF_PER_FETCHED / max(hints._owner_share(owner_id), 1e-6))
    ef_search = max(settings.ANN_EF_SEARCH, min(settings.ANN_EF_SEARCH_MAX, widened))
    statements._set_hnsw(
        ef_search=ef_search, max_scan_tuples=max(settings.ANN_MAX_SCAN_TUPLES, 2 * ef_search)
    )
    return _visible_neighbours(visible, embedding, fetch, exact=False)


def _thin_in_the_table(owner_id: int, fetch: int) -> bool:
    """Whether even the widest scan (ANN_EF_SEARCH_MAX) would meet too few of a small owner's memories.

    Such an owner (at most EXACT_FALLBACK_MAX_MEMORIES memories, estimated as
    their share times the table's rows) gets exact search at once rather than a
    scan that comes back short and pays for both.
    """
    share = hints._owner_share(owner_id)
    if fetch * settings.ANN_EF_PER_FETCHED <= settings.ANN_EF_SEARCH_MAX * share:
        return False
    return share * hints._relation_rows(Memory._meta.db_table) <= settings.EXACT_FALLBACK_MAX_MEMORIES


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
    return statements._fetch_prepared(
        "SELECT visible.id, visible.embedding <=> %s::vector "
        f"FROM ({scope_sql}) AS visible (id, embedding) "
        f"WHERE visible.id = ANY({ids_sql}) AND visible.embedding IS NOT NULL "
        "ORDER BY (visible.embedding <=> %s::vector) + 0, visible.id LIMIT %s",
        [vector, *scope_params, *ids_params, vector, limit],
    )
