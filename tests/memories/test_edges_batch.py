"""Edges for a batch of memories (memory_edges_refresh_batch) are the edges memory by memory.

A small world of two owners whose vectors sit close together (clustered, so the
`similar` lists fill and overlap) and whose memories share people: the batched path
must write exactly the rows memory_edges_refresh writes one memory at a time, and
name the same neighbours as stale, through exact search and through the HNSW index,
and never link one owner's memory to another's.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.utils import timezone

from memories import services
from memories.models import EdgeKind, Memory, MemoryEdge
from memories.search import hints
from memories.services import ParticipantSpec, memory_create
from people.services import person_create

pytestmark = pytest.mark.django_db

MEMORIES_EACH = 45


def _world(*owners) -> list[Memory]:
    rng = np.random.default_rng(41)
    centroids = rng.standard_normal((4, 384)).astype(np.float32)
    made = []
    for owner in owners:
        me = owner.people.get(is_self=True)
        people = [person_create(owner=owner, display_name=name) for name in ("Bob", "Carol", "Dan", "Eve")]
        for index in range(MEMORIES_EACH):
            with_them = [people[(index + step) % len(people)] for step in range(index % 3)]
            participants = [ParticipantSpec(person) for person in with_them]
            if index % 5 == 0:
                participants.append(ParticipantSpec(me))
            memory = memory_create(owner=owner, body=f"Entry {index}", participants=participants)
            # Shared centroids: the two owners' memories are each other's nearest too.
            vector = centroids[index % 4] + rng.standard_normal(384).astype(np.float32) * 0.9
            if index % 9 == 0:
                vector = None  # not embedded yet: shared-person edges only
            else:
                vector = vector / np.linalg.norm(vector)
            Memory.objects.filter(pk=memory.pk).update(
                embedding=vector, embedded_at=timezone.now() if vector is not None else None
            )
            made.append(memory)
    return made


def _edge_rows() -> set[tuple]:
    return {
        (str(source_id), str(target_id), kind, round(weight, 6), owner_id)
        for source_id, target_id, kind, weight, owner_id in MemoryEdge.objects.values_list(
            "source_id", "target_id", "kind", "weight", "owner_id"
        )
    }


@pytest.fixture(params=["exact", "hnsw"])
def search_path(request, monkeypatch):
    if request.param == "hnsw":
        # Both paths search through the index, as for an owner past EXACT_SEARCH_MAX_MEMORIES.
        monkeypatch.setattr(hints, "_small_owner", lambda owner_id: False)
    return request.param


def test_the_batch_writes_the_edges_one_by_one_writes_and_names_the_same_neighbours(
    alice, mallory, search_path
):
    memories = _world(alice, mallory)
    ids = [memory.pk for memory in memories]

    for memory_id in ids:
        services.memory_edges_refresh(memory_id=memory_id)
    one_by_one = _edge_rows()
    assert {kind for _, _, kind, _, _ in one_by_one} == {EdgeKind.SIMILAR, EdgeKind.SHARED_PERSON}
    owner_of = {str(memory.pk): memory.owner_id for memory in memories}
    # Edges stay inside one journal.
    assert all(owner_of[source] == owner_of[target] == owner for source, target, _, _, owner in one_by_one)

    MemoryEdge.objects.all().delete()
    for start in range(0, len(ids), 16):  # batches that mix both owners
        services.memory_edges_refresh_batch(memory_ids=ids[start : start + 16][::-1])
    assert _edge_rows() == one_by_one

    # From the same complete state, the neighbours named stale are the same.
    some = ids[::7]
    single: set = set()
    for memory_id in some:
        single |= services.memory_edges_refresh(memory_id=memory_id)
    assert services.memory_edges_refresh_batch(memory_ids=some) == single - set(some)
    assert _edge_rows() == one_by_one
    # Without looking for neighbours (follow-ups): the same rows, nothing named.
    assert services.memory_edges_refresh_batch(memory_ids=ids, neighbours=False) == set()
    assert _edge_rows() == one_by_one


def test_refresh_many_goes_through_the_batch_and_invalidates_outside_neighbours(alice):
    memories = _world(alice)
    ids = [memory.pk for memory in memories]
    services.memory_edges_refresh_many(memory_ids=ids, invalidate_neighbours=False)
    computed = _edge_rows()
    MemoryEdge.objects.all().delete()
    for memory_id in ids:
        services.memory_edges_refresh(memory_id=memory_id)
    assert _edge_rows() == computed

    first = ids[:10]
    # Nothing changed: every list pointing at them still holds, nothing to recompute.
    assert services.memory_edges_refresh_many(memory_ids=first, invalidate_neighbours=True) == []
    assert _edge_rows() == computed
    # Their vectors changed: the lists pointing at them are searched again.
    rng = np.random.default_rng(5)
    for memory_id in first:
        vector = rng.standard_normal(384).astype(np.float32)
        Memory.objects.filter(pk=memory_id, embedding__isnull=False).update(
            embedding=vector / np.linalg.norm(vector), embedded_at=timezone.now()
        )
    outside = services.memory_edges_refresh_many(memory_ids=first, invalidate_neighbours=True)
    assert outside and not set(outside) & set(first)
    # Marked follow-ups (their own lists only), not cleared (their neighbours' too).
    marked = Memory.objects.filter(edges_computed_at=services.EDGES_FOLLOW_UP)
    assert set(marked.values_list("pk", flat=True)) == set(outside)


def test_a_deleted_memory_in_the_batch_is_skipped(alice):
    memories = _world(alice)
    ids = [memory.pk for memory in memories]
    gone = ids[1]
    Memory.objects.filter(pk=gone).delete()
    services.memory_edges_refresh_batch(memory_ids=ids)
    assert not MemoryEdge.objects.filter(target_id=gone).exists()
    assert not MemoryEdge.objects.filter(source_id=gone).exists()
    assert MemoryEdge.objects.filter(source_id=memories[2].pk).exists()
