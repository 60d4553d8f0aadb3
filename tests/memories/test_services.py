from __future__ import annotations

import pytest
from django.contrib.postgres.search import SearchQuery
from django.core.exceptions import ValidationError

from memories.models import Memory, MemoryParticipant
from memories.services import ParticipantSpec, memory_create, memory_update
from people.services import person_create


def test_memory_saved_with_participants(alice):
    bob = person_create(owner=alice, display_name="Bob")
    memory = memory_create(
        owner=alice, body="Bob taught me chess", participants=[ParticipantSpec(bob, "present")]
    )
    assert list(memory.participants.values_list("person__display_name", "role")) == [("Bob", "present")]


def test_bad_participant_saves_nothing(alice, mallory):
    bob = person_create(owner=alice, display_name="Bob")
    mallorys_friend = person_create(owner=mallory, display_name="Eve")
    with pytest.raises(ValidationError):
        memory_create(
            owner=alice,
            body="Should not be saved",
            participants=[ParticipantSpec(bob), ParticipantSpec(mallorys_friend)],
        )
    assert not Memory.objects.filter(owner=alice).exists()
    assert not MemoryParticipant.objects.exists()


def test_participant_insert_failure_rolls_back_memory(alice):
    bob = person_create(owner=alice, display_name="Bob")
    with pytest.raises(ValidationError):
        memory_create(
            owner=alice, body="Twice", participants=[ParticipantSpec(bob), ParticipantSpec(bob, "present")]
        )
    assert not Memory.objects.filter(owner=alice).exists()


def test_empty_body_is_refused(alice):
    with pytest.raises(ValidationError) as excinfo:
        memory_create(owner=alice, body="   ")
    assert "body" in excinfo.value.message_dict


def test_update_replaces_participants(alice):
    bob = person_create(owner=alice, display_name="Bob")
    carol = person_create(owner=alice, display_name="Carol")
    memory = memory_create(owner=alice, body="Picnic", participants=[ParticipantSpec(bob)])
    memory_update(memory=memory, body="Picnic by the lake", participants=[ParticipantSpec(carol, "source")])
    memory.refresh_from_db()
    assert memory.body == "Picnic by the lake"
    assert list(memory.participants.values_list("person__display_name", "role")) == [("Carol", "source")]


def test_full_text_vector_is_generated(alice):
    memory_create(owner=alice, title="Beach", body="We went swimming in the ocean")
    assert Memory.objects.filter(owner=alice, search_vector=SearchQuery("swims", config="english")).exists()
    assert not Memory.objects.filter(
        owner=alice, search_vector=SearchQuery("mountain", config="english")
    ).exists()
