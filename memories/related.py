"""The memory page's "Related memories": each memory once, with every way it is related.

memory_related returns one hit per (memory, kind): a memory both alike and sharing a
person came back twice. The page lists it once, its kinds together, in the order the
hits came (the first kind it was found by decides its place).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memories.models import EdgeKind, Memory
from memories.retrieval import RelatedHit


@dataclass(frozen=True)
class RelatedEntry:
    memory: Memory
    kinds: tuple[str, ...]

    @property
    def kind_label(self) -> str:
        return " · ".join(EdgeKind(kind).label for kind in self.kinds)


def related_once(hits: Iterable[RelatedHit]) -> list[RelatedEntry]:
    by_memory: dict[object, tuple[Memory, list[str]]] = {}
    for hit in hits:
        memory, kinds = by_memory.setdefault(hit.memory.pk, (hit.memory, []))
        if hit.kind not in kinds:
            kinds.append(hit.kind)
    return [RelatedEntry(memory=memory, kinds=tuple(kinds)) for memory, kinds in by_memory.values()]
