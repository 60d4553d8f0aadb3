"""Similar and related memories: memory_similar, memory_related.

For agents both start from the gate's scope (memory_scope with respect_consent) and
answer nothing when the memory itself does not pass; related memories are then computed
live among the memories that pass, never from the stored edges (see _gated_relations).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings as django_settings
from django.db.models import Count, Q, QuerySet

from memories.gate import _scope_sql, memory_scope
from memories.models import EdgeKind, Memory, MemoryEdge, MemoryParticipant
from memories.search import fusion, hybrid, statements, vector


@dataclass(frozen=True)
class RelatedHit:
    memory: Memory
    kind: str
    weight: float

    @property
    def kind_label(self) -> str:
        return EdgeKind(self.kind).label


def _anchor_embedding(memory: Memory) -> list[float] | None:
    # Read fresh: the worker may have stored (or an edit cleared) the vector since
    # this instance was loaded.
    embedding = Memory.objects.filter(pk=memory.pk).values_list("embedding", flat=True).first()
    return None if embedding is None else list(embedding)


def memory_similar(
    memory: Memory, *, respect_consent: bool = False, limit: int = 10, may_read_sensitive: bool = False
) -> list[fusion.SearchHit]:
    """The memories nearest in meaning to `memory` (never itself), nearest first.

    For agents: nothing at all when `memory` itself does not pass the gate, and
    only gated memories otherwise. A memory not yet embedded has no neighbours.
    """
    hybrid._check_limit(limit)
    with statements._search_transaction():
        scope = memory_scope(
            memory.owner_id, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive
        )
        if respect_consent and not scope.filter(pk=memory.pk).exists():
            return []
        embedding = _anchor_embedding(memory)
        if embedding is None:
            return []
        others = scope.exclude(pk=memory.pk)
        nearest = vector._nearest_neighbours(
            others, embedding, owner_id=memory.owner_id, limit=limit, gated=respect_consent
        )
        memories = fusion._load(_scope_sql(others), [memory_id for memory_id, _ in nearest])
    return [
        fusion.SearchHit(memory=memories[memory_id], score=1.0 - distance, similarity=1.0 - distance)
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
        minimum = django_settings.MEMORY_EDGES_SIMILAR_MIN_SIMILARITY
        for memory_id, distance in vector._nearest_neighbours(
            others,
            embedding,
            owner_id=memory.owner_id,
            limit=django_settings.MEMORY_EDGES_SIMILAR_LIMIT,
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
        .values_list("pk", "shared")[: django_settings.MEMORY_EDGES_SHARED_PERSON_LIMIT]
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
    hybrid._check_limit(limit)
    with statements._search_transaction():
        scope = memory_scope(
            memory.owner_id, respect_consent=respect_consent, may_read_sensitive=may_read_sensitive
        )
        if respect_consent:
            if not scope.filter(pk=memory.pk).exists():
                return []
            relations = _gated_relations(memory, scope)
        else:
            relations = _stored_edges(memory, scope, limit)
        memories = fusion._load(_scope_sql(scope), [memory_id for memory_id, _, _ in relations])
    hits = [
        RelatedHit(memory=memories[memory_id], kind=kind, weight=weight)
        for memory_id, kind, weight in relations
        if memory_id in memories
    ]
    return hits[:limit]
