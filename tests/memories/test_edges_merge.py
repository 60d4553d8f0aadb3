"""New memories merged into their neighbours' lists give the lists a search from scratch gives.

An import adds memories batch by batch; each batch's memories enter older memories'
`similar` and `shared_person` lists. Instead of searching again for every such
neighbour (a follow-up), memory_edges_refresh_many ranks the new memories into the
neighbour's complete list (_edges_merge). In a world small enough that every memory's
candidates are all of the owner's others (under 50 memories; each person in fewer
than ten), the merged lists must be exactly the lists of a refresh from scratch, and
no follow-up is left to queue. A list that is not complete, or that pointed at a
memory whose vector changed, is still recomputed.
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

CENTROIDS = np.random.default_rng(43).standard_normal((3, 384)).astype(np.float32)


def _add(owner, people, rng, count: int, start: int) -> list:
    made = []
    for index in range(start, start + count):
        with_them = [people[(index + step) % len(people)] for step in range(index % 3)]
        memory = memory_create(
            owner=owner, body=f"Entry {index}", participants=[ParticipantSpec(person) for person in with_them]
        )
        vector = CENTROIDS[index % 3] + rng.standard_normal(384).astype(np.float32) * 0.8
        Memory.objects.filter(pk=memory.pk).update(
            embedding=vector / np.linalg.norm(vector), embedded_at=timezone.now()
        )
        made.append(memory.pk)
    return made


def _edge_rows() -> set[tuple]:
    return {
        (str(source_id), str(target_id), kind, round(weight, 6))
        for source_id, target_id, kind, weight in MemoryEdge.objects.values_list(
            "source_id", "target_id", "kind", "weight"
        )
    }


@pytest.fixture(params=["exact", "hnsw"])
def search_path(request, monkeypatch):
    if request.param == "hnsw":
        monkeypatch.setattr(hints, "_small_owner", lambda owner_id: False)
    return request.param


def test_batches_merged_into_older_lists_equal_a_refresh_from_scratch(alice, search_path):
    rng = np.random.default_rng(7)
    people = [person_create(owner=alice, display_name=f"Friend {n}") for n in range(8)]
    old = _add(alice, people, rng, 24, 0)
    services.memory_edges_refresh_many(memory_ids=old, invalidate_neighbours=False)
    before = _edge_rows()

    # As an import does: a batch is embedded, then its edges; then the next batch.
    first = _add(alice, people, rng, 8, 24)
    assert services.memory_edges_refresh_many(memory_ids=first, invalidate_neighbours=True) == []
    second = _add(alice, people, rng, 8, 32)
    assert services.memory_edges_refresh_many(memory_ids=second, invalidate_neighbours=True) == []
    merged = _edge_rows()

    # Older lists did change (the merge wrote), of both kinds.
    old_ids = {str(memory_id) for memory_id in old}
    changed = {(source, kind) for source, _, kind, _ in merged - before if source in old_ids}
    assert {kind for _, kind in changed} == {EdgeKind.SIMILAR, EdgeKind.SHARED_PERSON}
    # Nothing was left for a follow-up: every stamp stands.
    assert not Memory.objects.filter(owner=alice, edges_computed_at__isnull=True).exists()
    assert not Memory.objects.filter(owner=alice, edges_computed_at=services.EDGES_FOLLOW_UP).exists()

    MemoryEdge.objects.all().delete()
    services.memory_edges_refresh_many(memory_ids=old + first + second, invalidate_neighbours=False)
    assert _edge_rows() == merged


def test_a_list_not_computed_since_its_embedding_is_left_to_its_own_refresh(alice):
    rng = np.random.default_rng(8)
    people = [person_create(owner=alice, display_name=f"Friend {n}") for n in range(8)]
    old = _add(alice, people, rng, 20, 0)
    services.memory_edges_refresh_many(memory_ids=old, invalidate_neighbours=False)
    # Its vector changed after its lists were computed: its lists are not complete, and
    # its own refresh (queued with its embedding, or the sweep's) is still to come.
    stale = old[3]
    Memory.objects.filter(pk=stale).update(embedded_at=timezone.now())
    before = set(MemoryEdge.objects.filter(source_id=stale).values_list("target_id", "kind", "weight"))

    new = _add(alice, people, rng, 6, 20)
    # Nothing merged into it, no follow-up queued for it: its own refresh searches.
    assert services.memory_edges_refresh_many(memory_ids=new, invalidate_neighbours=True) == []
    assert (
        set(MemoryEdge.objects.filter(source_id=stale).values_list("target_id", "kind", "weight")) == before
    )
    memory = Memory.objects.get(pk=stale)
    assert memory.edges_computed_at < memory.embedded_at
    plan = services.memory_sweep_plan(batch_size=10, max_memories=100, grace=timezone.timedelta(0))
    assert plan.stale_edges == [stale] and plan.follow_ups == []


def test_lists_that_pointed_at_a_changed_memory_are_searched_again(alice):
    rng = np.random.default_rng(9)
    people = [person_create(owner=alice, display_name=f"Friend {n}") for n in range(8)]
    memories = _add(alice, people, rng, 20, 0)
    services.memory_edges_refresh_many(memory_ids=memories, invalidate_neighbours=False)
    changed = memories[5]
    pointing = set(
        MemoryEdge.objects.filter(target_id=changed, kind=EdgeKind.SIMILAR).values_list(
            "source_id", flat=True
        )
    )
    assert pointing
    # Its text changed: a new vector, far from where it was.
    vector = CENTROIDS[(5 + 1) % 3] + rng.standard_normal(384).astype(np.float32) * 0.8
    Memory.objects.filter(pk=changed).update(
        embedding=vector / np.linalg.norm(vector), embedded_at=timezone.now()
    )

    outside = services.memory_edges_refresh_many(memory_ids=[changed], invalidate_neighbours=True)
    assert pointing <= set(outside)
    # Marked follow-ups: the sweep refreshes their own lists, and no further.
    assert set(
        Memory.objects.filter(edges_computed_at=services.EDGES_FOLLOW_UP).values_list("pk", flat=True)
    ) == set(outside)
    services.memory_edges_refresh_many(memory_ids=outside, invalidate_neighbours=False)
    after = _edge_rows()
    MemoryEdge.objects.all().delete()
    services.memory_edges_refresh_many(memory_ids=memories, invalidate_neighbours=False)
    assert _edge_rows() == after


def test_a_full_list_ranks_a_new_memory_by_people_then_date_then_id(alice):
    # Twelve memories with Pat, one a day: the first one's list is full (the ten most
    # recent of the other eleven: days 2-11). A new one, dated between, with Pat: it ranks
    # in by its date and pushes day 2 out, as a search from scratch would rank it.
    pat = person_create(owner=alice, display_name="Pat")
    start = timezone.now() - timezone.timedelta(days=30)
    days = [
        memory_create(
            owner=alice,
            body=f"Day {day}",
            occurred_at=start + timezone.timedelta(days=day),
            participants=[ParticipantSpec(pat)],
        ).pk
        for day in range(12)
    ]
    services.memory_edges_refresh_many(memory_ids=days, invalidate_neighbours=False)
    anchor = days[0]
    new = memory_create(
        owner=alice,
        body="Between",
        occurred_at=start + timezone.timedelta(days=4, hours=12),
        participants=[ParticipantSpec(pat)],
    ).pk

    def shared_list(memory_id):
        return list(
            MemoryEdge.objects.filter(source_id=memory_id, kind=EdgeKind.SHARED_PERSON)
            .order_by("-weight", "target_id")
            .values_list("target_id", "weight")
        )

    before = shared_list(anchor)
    assert len(before) == 10 and new not in dict(before) and days[2] in dict(before)
    assert services._edges_merge({anchor: [(EdgeKind.SHARED_PERSON, new, 1.0)]}) == set()
    merged = shared_list(anchor)
    assert new in dict(merged) and days[2] not in dict(merged)
    MemoryEdge.objects.filter(source_id=anchor).delete()
    services.memory_edges_refresh(memory_id=anchor)
    assert shared_list(anchor) == merged
