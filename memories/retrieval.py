"""Retrieval: the search engine's public face. Every surface searches memories through these names.

Who may see what is decided by the consent gate, memories/gate.py, and nowhere else. The
engine, memories/search/, searches inside the gate's scopes (their compiled SQL) and never
decides visibility: hybrid search (nearest neighbours over HNSW indexes plus PostgreSQL full
text, fused with reciprocal rank fusion), circle search, similar and related memories. Its
strategies are chosen by hints (maintained counts, statistics) that may only narrow where a
search looks; the gate in every statement decides what passes. docs/search.md describes it.

This module only re-exports; it holds no logic and none of the engine's tuning. To change a
constant or replace a function in a test or a benchmark, patch the module of memories/search
that defines it, whose code reads it (`monkeypatch.setattr(memories.search.settings,
"EXACT_CANDIDATES_MAX", 0)`): a name patched here would reach no search, so that is refused.
"""

from __future__ import annotations

import sys
import types

from memories.gate import agent_visible_memories, circle_visible_memories, memory_scope
from memories.search.circles import circle_memory_search, circle_memory_timeline
from memories.search.fulltext import memory_search_highlights
from memories.search.fusion import NO_CUTOFF, RelevanceCutoff, SearchHit, question_relevance, search_relevance
from memories.search.hints import forget_hints, hint_caches
from memories.search.hybrid import memory_search
from memories.search.related import RelatedHit, memory_related, memory_similar
from memories.search.settings import MAX_LIMIT

__all__ = [
    "MAX_LIMIT",
    "NO_CUTOFF",
    "RelatedHit",
    "RelevanceCutoff",
    "SearchHit",
    "agent_visible_memories",
    "circle_memory_search",
    "circle_memory_timeline",
    "circle_visible_memories",
    "forget_hints",
    "hint_caches",
    "memory_related",
    "memory_scope",
    "memory_search",
    "memory_search_highlights",
    "memory_similar",
    "question_relevance",
    "search_relevance",
]


_ENGINE = (
    "settings",
    "hints",
    "statements",
    "knn",
    "knn_open",
    "vector",
    "fulltext",
    "fusion",
    "hybrid",
    "circles",
)


def _defined_in(name: str) -> str:
    for path in ("memories.gate", *(f"memories.search.{module}" for module in _ENGINE)):
        value = vars(sys.modules[path]).get(name, _Facade)
        # A function or class defined there (not imported there), or a constant, a cache.
        if value is not _Facade and (not callable(value) or value.__module__ == path):
            return path
    return "the module of memories/search that defines it"


class _Facade(types.ModuleType):
    """Refuses assignments: a patch of a re-exported name would silently change nothing."""

    def __setattr__(self, name: str, value: object) -> None:
        if name.startswith("__"):  # the import system's own (importlib.reload)
            return super().__setattr__(name, value)
        raise AttributeError(
            f"memories.retrieval only re-exports; patch {name} in {_defined_in(name)}, whose code reads it"
        )

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)


sys.modules[__name__].__class__ = _Facade
