"""Consent flips racing memory edits, through the API, each thread on its own connection.

A consent change locks the person and then the gate rows of the person's
memories; an edit of a memory's people locks its gate row and its people. Under
contention PostgreSQL may find them waiting on each other and abort one
(a deadlock). None of that may reach the person: every request answers 200, the
consent history has exactly one event per change, and afterwards the counts the
triggers keep are exact (`doctor` finds nothing).
"""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from accounts.models import TokenKind
from accounts.services import access_token_create
from memories.doctor import doctor_examine
from memories.embeddings import MODEL_NAME
from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryKind
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentEvent, ConsentStatus, Person
from people.services import person_create

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

ROUNDS = 40  # requests per thread
STATUSES = [ConsentStatus.GRANTED, ConsentStatus.REVOKED, ConsentStatus.PENDING]


JSON = "application/json"


def _api(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


def test_consent_flips_racing_memory_edits_never_fail_and_leave_exact_counts(alice):
    _, token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="race")
    people = [person_create(owner=alice, display_name=name) for name in ("Bob", "Carol", "Dana", "Erin")]
    memories = [
        memory_create(
            owner=alice,
            body=f"Evening {index} with friends",
            kind=MemoryKind.KNOWLEDGE,  # never expires: doctor has nothing to mark
            participants=[ParticipantSpec(person) for person in people[index % 4 :] + people[: index % 2]],
        )
        for index in range(6)
    ]
    # Stored vectors, so doctor has no embedding to report; edits below keep the text.
    Memory.objects.filter(owner=alice).update(
        embedding=[0.1] * EMBEDDING_DIMENSIONS, embedding_model=MODEL_NAME, embedded_at=timezone.now()
    )

    failures: list[str] = []
    changes: Counter = Counter()
    start = threading.Barrier(4)

    def flip_consents(seed: int) -> None:
        rng = random.Random(seed)
        client = _api(token)
        try:
            start.wait()
            for _ in range(ROUNDS):
                person = rng.choice(people)
                status = rng.choice(STATUSES)
                response = client.post(
                    f"/api/v1/people/{person.pk}/consent/",
                    {"status": status},
                    content_type="application/json",
                )
                if response.status_code != 200:
                    failures.append(f"consent {response.status_code}: {response.content[:300]!r}")
                elif response.json()["event"] is not None:
                    changes[person.pk] += 1
        finally:
            connection.close()  # this thread's own connection

    def edit_memories(seed: int) -> None:
        rng = random.Random(seed)
        client = _api(token)
        try:
            start.wait()
            for _ in range(ROUNDS):
                memory = rng.choice(memories)
                chosen = rng.sample(people, rng.randint(1, 4))
                source = rng.choice([None, *people])
                body = {
                    "participants": [{"person": str(person.pk)} for person in chosen],
                    "source_person": str(source.pk) if source else None,
                    "kind": rng.choice([MemoryKind.KNOWLEDGE, MemoryKind.PREFERENCE]),
                }
                response = client.patch(
                    f"/api/v1/memories/{memory.pk}/", body, content_type="application/json"
                )
                if response.status_code != 200:
                    failures.append(f"edit {response.status_code}: {response.content[:300]!r}")
        finally:
            connection.close()

    threads = [
        threading.Thread(target=flip_consents, args=(1,)),
        threading.Thread(target=flip_consents, args=(2,)),
        threading.Thread(target=edit_memories, args=(3,)),
        threading.Thread(target=edit_memories, args=(4,)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    assert not any(thread.is_alive() for thread in threads), "a request hung"
    assert failures == []

    # One event per change that happened, none lost or doubled.
    for person in people:
        assert ConsentEvent.objects.filter(person=person, audience="agents").count() == changes[person.pk]
        last = (
            ConsentEvent.objects.filter(person=person, audience="agents").order_by("created_at", "id").last()
        )
        current = Person.objects.get(pk=person.pk).consent_status
        assert current == (last.new_status if last else ConsentStatus.PENDING)

    findings = {finding.check.code: finding.ids for finding in doctor_examine() if finding.ids}
    assert findings == {}
