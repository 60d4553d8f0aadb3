"""memory_search: the owner's and the owner's agents' hybrid search, and the checks every search makes.

Both sides run inside the gate's scope (memories/gate.py: memory_scope, or its compiled
SQL): the vector side (vector.py) in the caller's thread, the full-text side (fulltext.py)
on the side runner's connection when it can (statements.py), fused by fusion.py.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from memories.gate import _compiled_scope, _owner_id, _scope_sql, memory_scope
from memories.models import EMBEDDING_DIMENSIONS, Memory
from memories.search import fulltext, fusion, hints, settings, statements, vector
from memories.selectors import MemoryFilters, memory_apply_filters

logger = logging.getLogger(__name__)


def _check_limit(limit: int) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= settings.MAX_LIMIT:
        raise ValidationError({"limit": f"Limit must be a whole number from 1 to {settings.MAX_LIMIT}."})


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


def memory_search(
    owner: AbstractBaseUser | int,
    query: str,
    *,
    respect_consent: bool = False,
    limit: int = 10,
    filters: MemoryFilters | None = None,
    query_embedding: Sequence[float] | None = None,
    relevance: fusion.RelevanceCutoff | None = None,
    may_read_sensitive: bool = False,
) -> list[fusion.SearchHit]:
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
    open_count, unindexed = hints._open_hint(_owner_id(owner)) if respect_consent else (None, True)
    if open_count == 0:
        # Per the maintained count nothing of this owner's can pass the gate: skip
        # both searches (and embedding the query). A hint only: see hints.py.
        return []
    embedding = _check_embedding(query_embedding) if query_embedding is not None else _embed_query(query)
    depth = max(limit, settings.FUSION_DEPTH_MIN)
    owner_id = _owner_id(owner)
    # Few open memories (per the hint): a filtered search looks for text matches among
    # them alone (unfiltered, the agents' candidates are always the open ones).
    open_only = respect_consent and open_count <= settings.EXACT_CANDIDATES_MAX
    with statements._search_transaction():
        # Unfiltered: the owner's text copy, whose indexes also rank one word exactly.
        unfiltered = filters is None or filters == MemoryFilters()
        # The owner's size, asked once for both sides, and only where it decides
        # something: agents with more open memories than that are not small; with
        # few, an unfiltered search asks for its text side (a small owner's own rows),
        # a filtered one (None) leaves the vector side to ask if it needs to.
        small_owner: bool | None = None
        if open_count is not None and open_count > settings.EXACT_SEARCH_MAX_MEMORIES:
            small_owner = False
        elif not respect_consent or unfiltered:
            small_owner = hints._small_owner(owner_id)

        def scope() -> QuerySet[Memory]:
            return memory_apply_filters(
                memory_scope(owner, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive),
                filters,
            )

        if unfiltered:
            visible = _compiled_scope(
                owner_id, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive
            )
            candidates = fulltext._owner_candidates_sql(
                owner_id, agents=respect_consent, small_owner=bool(small_owner)
            )
        else:
            visible = _scope_sql(scope())
            owner_filtered = memory_apply_filters(memory_scope(owner, respect_consent=False), filters)
            candidates = fulltext._candidates_sql(
                vector._among_open_memories(owner_filtered, owner_id) if open_only else owner_filtered
            )
        text_side = functools.partial(
            fulltext._text_matches,
            visible,
            query,
            depth,
            candidates=candidates,
            embedding=embedding,
            # A small owner's matches are no more than TEXT_CANDIDATES_MAX: all ranked
            # anyway, from the owner's own rows (the one-word branches would compute
            # the repeated words of each: ~9 ms for 1,000 rows).
            one_word_exact=unfiltered
            and not (small_owner and settings.EXACT_SEARCH_MAX_MEMORIES <= settings.TEXT_CANDIDATES_MAX),
        )
        # The full-text side on the helper's connection while this one runs the vector side.
        text = statements._SIDE_RUNNER.start(text_side) if embedding is not None else text_side
        nearest = (
            vector._nearest_neighbours(
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
        return fusion._fused_hits(
            visible, nearest, text(), limit, relevance=relevance or fusion.search_relevance()
        )
