from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from memories.services import ParticipantSpec, memory_create
from people.models import ConsentEvent, ConsentStatus, Person
from people.services import PersonInUse, person_create, person_delete, person_set_consent


def test_new_person_starts_pending(alice):
    person = person_create(owner=alice, display_name="  Grandma Rose ", aliases=["Rose", "Rose", ""])
    assert person.consent_status == ConsentStatus.PENDING
    assert person.display_name == "Grandma Rose"
    assert person.aliases == ["Rose"]


def test_person_requires_a_name(alice):
    with pytest.raises(ValidationError):
        person_create(owner=alice, display_name="   ")
    assert Person.objects.filter(owner=alice, is_self=False).count() == 0


def test_self_is_granted_on_signup(alice):
    me = Person.objects.get(owner=alice, is_self=True)
    assert me.consent_status == ConsentStatus.GRANTED
    assert me.linked_user == alice


def test_consent_change_appends_event(alice):
    person = person_create(owner=alice, display_name="Bob")
    event = person_set_consent(person=person, status="granted", actor=alice, reason="asked in person")
    assert event is not None
    assert (event.old_status, event.new_status, event.reason, event.surface) == (
        "pending",
        "granted",
        "asked in person",
        "ui",
    )
    person_set_consent(person=person, status="revoked", actor=alice)
    person.refresh_from_db()
    assert person.consent_status == "revoked"
    assert person.consent_updated_at is not None
    history = list(ConsentEvent.objects.filter(person=person).order_by("created_at", "id"))
    assert [(e.old_status, e.new_status) for e in history] == [("pending", "granted"), ("granted", "revoked")]


def test_unchanged_consent_records_nothing(alice):
    person = person_create(owner=alice, display_name="Bob")
    assert person_set_consent(person=person, status="pending", actor=alice) is None
    assert ConsentEvent.objects.filter(person=person).count() == 0


def test_invalid_consent_status_is_refused(alice):
    person = person_create(owner=alice, display_name="Bob")
    with pytest.raises(ValidationError):
        person_set_consent(person=person, status="maybe", actor=alice)
    person.refresh_from_db()
    assert person.consent_status == "pending"
    assert not ConsentEvent.objects.filter(person=person).exists()


def test_person_in_a_memory_cannot_be_deleted(alice):
    person = person_create(owner=alice, display_name="Bob")
    memory_create(owner=alice, body="Lunch with Bob", participants=[ParticipantSpec(person)])
    with pytest.raises(PersonInUse):
        person_delete(person=person)
    assert Person.objects.filter(pk=person.pk).exists()


def test_person_in_no_memory_can_be_deleted(alice):
    person = person_create(owner=alice, display_name="Bob")
    person_delete(person=person)
    assert not Person.objects.filter(pk=person.pk).exists()


def test_person_who_told_a_memory_cannot_be_deleted(alice):
    """Clearing "told by" would open the memory to agents without their consent."""
    teller = person_create(owner=alice, display_name="Tess")
    memory = memory_create(owner=alice, body="Tess said the bakery is closing", source_person=teller)
    with pytest.raises(PersonInUse) as excinfo:
        person_delete(person=teller)
    assert excinfo.value.memory_count == 1
    memory.refresh_from_db()
    assert memory.source_person == teller


def test_person_counted_once_when_participant_and_source(alice):
    bob = person_create(owner=alice, display_name="Bob")
    memory_create(
        owner=alice, body="Bob told me about his trip", source_person=bob, participants=[ParticipantSpec(bob)]
    )
    with pytest.raises(PersonInUse) as excinfo:
        person_delete(person=bob)
    assert excinfo.value.memory_count == 1
