"""What is still waiting for its embedding: the counts, and the timeline's quiet note."""

from __future__ import annotations

from django.test import Client
from django.urls import reverse

from memories.indexing import memory_indexing_progress, memory_unindexed_count
from memories.models import Memory
from memories.services import memory_create, memory_embed_batch


def test_counts_are_the_owners_own(alice, mallory):
    mine = [memory_create(owner=alice, body=f"Swim {n}") for n in range(3)]
    memory_create(owner=mallory, body="Mallory's note")
    memory_embed_batch(memory_ids=[mine[0].pk])

    assert memory_unindexed_count(owner=alice) == 2
    progress = memory_indexing_progress(owner=alice, memory_ids=[m.pk for m in mine])
    assert (progress.indexed, progress.total, progress.waiting, progress.done) == (1, 3, 2, False)
    # Someone else's memory ids count for nothing.
    other = memory_indexing_progress(
        owner=alice, memory_ids=Memory.objects.filter(owner=mallory).values("pk")
    )
    assert (other.total, other.done) == (0, True)


def test_timeline_note_appears_while_memories_wait_and_goes_when_they_are_indexed(alice, mallory):
    client = Client()
    client.force_login(alice)
    memory_create(owner=mallory, body="Not Alice's")
    first = memory_create(owner=alice, body="Picnic by the river")
    assert (
        "1 memory is still being indexed — search finds it by words meanwhile."
        in client.get(reverse("timeline")).content.decode()
    )

    second = memory_create(owner=alice, body="Rowing at dawn")
    page = client.get(reverse("timeline")).content.decode()
    assert "2 memories are still being indexed — search finds them by words meanwhile." in page

    memory_embed_batch(memory_ids=[first.pk, second.pk])
    assert "still being indexed" not in client.get(reverse("timeline")).content.decode()
