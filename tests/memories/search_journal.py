"""A small committed journal for the transactional search tests (test_search_sides,
test_search_round_trips): the world, the query vectors, and the search they both make."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
from django.utils import timezone

from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryParticipant
from memories.retrieval import NO_CUTOFF, memory_search
from people.models import ConsentStatus, Person
from tests.factories import UserFactory

WORDS = ["lantern", "orchard", "violin", "harbor"]


def unit_vector(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(EMBEDDING_DIMENSIONS)
    return [float(value) for value in vector / np.linalg.norm(vector)]


def make_journal():
    """An owner (Self granted) with 24 memories: a third with a withheld person, a third a granted one.
    (owner, the withheld person, the ids of the memories they are in)."""
    owner = UserFactory()
    granted = Person.objects.create(owner=owner, display_name="Gran", consent_status=ConsentStatus.GRANTED)
    withheld = Person.objects.create(owner=owner, display_name="Wes", consent_status=ConsentStatus.REVOKED)
    now = timezone.now()
    withheld_ids = set()
    for number in range(24):
        memory = Memory.objects.create(
            id=uuid.uuid4(),
            owner=owner,
            body=f"{WORDS[number % 4]} {WORDS[(number + 1) % 4]} number {number}",
            occurred_at=now - timedelta(days=number),
            embedding=unit_vector(number),
        )
        if number % 3 == 1:
            MemoryParticipant.objects.create(memory=memory, person=granted, role="subject")
        elif number % 3 == 2:
            MemoryParticipant.objects.create(memory=memory, person=withheld, role="subject")
            withheld_ids.add(memory.pk)
    return owner, withheld, withheld_ids


def search(owner, words: str, *, respect_consent: bool, seed: int = 7) -> list[tuple[uuid.UUID, float]]:
    hits = memory_search(
        owner,
        words,
        respect_consent=respect_consent,
        limit=12,
        query_embedding=unit_vector(seed),
        relevance=NO_CUTOFF,
    )
    return [(hit.memory.pk, round(hit.score, 9)) for hit in hits]
