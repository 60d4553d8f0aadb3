"""The search paths the benches measure, and the exact references their recall is counted against.

Each returns the memory ids found, best first. They call the search engine's own steps
(memories/search/, some private), so a bench measures what a search runs, not a copy.
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import transaction
from django.db.models import F
from pgvector.django import CosineDistance


def nearest_ids(scope, query, *, owner_id: int, limit: int, gated: bool) -> list[uuid.UUID]:
    """The vector side alone, as a search runs it: in a search's own transaction (no parallel
    workers), with the gate compiled once as memory_search passes it."""
    from memories import gate
    from memories.search import statements, vector

    with statements._search_transaction():
        return [
            memory_id
            for memory_id, _ in vector._nearest_neighbours(
                scope,
                query,
                owner_id=owner_id,
                limit=limit,
                gated=gated,
                visible=gate._compiled_scope(owner_id, respect_consent=gated),
            )
        ]


def exact_ids(scope, query, limit: int) -> list[uuid.UUID]:
    """The exact nearest of `scope`: the vector side's truth."""
    from memories.search import knn

    with transaction.atomic():
        return [memory_id for memory_id, _ in knn._exact_neighbours(scope, query, limit)]


def hybrid_ids(owner_id: int, words: str, query, *, limit: int, gated: bool) -> list[uuid.UUID]:
    """memory_search with the query's vector given and no relevance cut-off: random vectors are
    all far apart, so this measures the search, not the cut-off."""
    from memories import retrieval

    hits = retrieval.memory_search(
        owner_id,
        words,
        respect_consent=gated,
        limit=limit,
        query_embedding=query,
        relevance=retrieval.NO_CUTOFF,
    )
    return [hit.memory.pk for hit in hits]


def exact_fused(scope, words: str, query, limit: int) -> list[uuid.UUID]:
    """The hybrid search's reference over `scope`: exact kNN and every full-text match
    ranked (no candidate bound), fused as the search fuses them."""
    from memories import gate, retrieval
    from memories.search import fusion, knn
    from memories.search import settings as search_settings

    tsquery = SearchQuery(words, config="english", search_type="websearch")
    depth = max(limit, search_settings.FUSION_DEPTH_MIN)
    with transaction.atomic():
        nearest = knn._exact_neighbours(scope, query, depth)
        text = list(
            scope.filter(search_vector=tsquery)
            .annotate(
                rank=SearchRank(F("search_vector"), tsquery), distance=CosineDistance("embedding", query)
            )
            .order_by("-rank", "-occurred_at", "pk")
            .values_list("pk", "rank", "distance")[:depth]
        )
        hits = fusion._fused_hits(gate._scope_sql(scope), nearest, text, limit, relevance=retrieval.NO_CUTOFF)
    return [hit.memory.pk for hit in hits]
