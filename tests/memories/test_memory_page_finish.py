"""The memory page: each related memory listed once; the "replaces" picker offers only older memories."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import EdgeKind, MemoryEdge
from memories.selectors import memory_supersede_options
from memories.services import ParticipantSpec, memory_create
from people.services import person_create

pytestmark = pytest.mark.django_db


def test_a_memory_related_two_ways_is_listed_once_with_both(alice_client, alice):
    bob = person_create(owner=alice, display_name="Bob")
    with_bob = [ParticipantSpec(person=bob)]
    chess = memory_create(owner=alice, title="Chess", body="Bob taught me chess.", participants=with_bob)
    rematch = memory_create(owner=alice, title="Rematch", body="Bob won the rematch.", participants=with_bob)
    for source, target, kind in [
        (chess, rematch, EdgeKind.SIMILAR),
        (rematch, chess, EdgeKind.SIMILAR),
        (chess, rematch, EdgeKind.SHARED_PERSON),
    ]:
        MemoryEdge.objects.create(owner=alice, source=source, target=target, kind=kind, weight=0.9)
    html = alice_client.get(reverse("memory_detail", args=[chess.pk])).content.decode()
    related = html[html.index("Related memories") :]
    assert related.count(reverse("memory_detail", args=[rematch.pk])) == 1
    entry = related[: related.index("</li>")]
    assert "Similar" in entry and "Shared person" in entry


def test_replaces_picker_offers_only_older_memories(alice):
    now = timezone.now()
    older = memory_create(owner=alice, body="Bob lives in Paris", occurred_at=now - timedelta(days=30))
    memory = memory_create(owner=alice, body="Bob moved to Berlin", occurred_at=now - timedelta(days=10))
    later = memory_create(owner=alice, body="Bob lives in Rome", occurred_at=now - timedelta(days=1))
    options = memory_supersede_options(memory=memory)
    assert older in options
    assert later not in options and memory not in options
    # From the later memory's page, both earlier ones are offered.
    assert {older, memory} <= set(memory_supersede_options(memory=later))
