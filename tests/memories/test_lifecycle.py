from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.utils import timezone

from memories import retrieval, tasks
from memories.lifecycle import (
    infer_kind,
    kind_lifetimes,
    memories_mark_expired,
    memory_expires_at,
)
from memories.models import Memory, MemoryKind
from memories.selectors import MemoryFilters, memory_list
from memories.services import memory_create, memory_update

OCCURRED = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kind", "days"),
    [
        (MemoryKind.CONTEXT, 7),
        (MemoryKind.EVENT, 30),
        (MemoryKind.TASK, 14),
        (MemoryKind.OBSERVATION, 3),
    ],
)
def test_short_lived_kinds_expire_their_lifetime_after_occurred_at(alice, kind, days):
    memory = memory_create(owner=alice, body="Something", kind=kind, occurred_at=OCCURRED)
    memory.refresh_from_db()
    assert memory.expires_at == OCCURRED + timedelta(days=days)


@pytest.mark.parametrize(
    "kind", [MemoryKind.PREFERENCE, MemoryKind.IDENTITY, MemoryKind.RELATIONSHIP, MemoryKind.KNOWLEDGE]
)
def test_long_lived_kinds_never_expire(alice, kind):
    memory = memory_create(owner=alice, body="Something", kind=kind, occurred_at=OCCURRED)
    memory.refresh_from_db()
    assert memory.expires_at is None
    assert memory.expired_at is None


def test_expiry_is_recomputed_when_kind_or_date_changes(alice):
    now = timezone.now()
    memory = memory_create(owner=alice, body="Dinner", kind=MemoryKind.EVENT, occurred_at=now)
    memory_update(memory=memory, body="Dinner", kind=MemoryKind.TASK)
    memory.refresh_from_db()
    assert memory.expires_at == now + timedelta(days=14)

    later = now + timedelta(days=2)
    memory_update(memory=memory, body="Dinner", kind=MemoryKind.TASK, occurred_at=later)
    memory.refresh_from_db()
    assert memory.expires_at == later + timedelta(days=14)

    memory_update(memory=memory, body="Dinner", kind=MemoryKind.KNOWLEDGE)
    memory.refresh_from_db()
    assert memory.expires_at is None


def test_memory_saved_already_past_its_lifetime_is_marked_at_once(alice):
    memory = memory_create(owner=alice, body="Old party", kind=MemoryKind.EVENT, occurred_at=OCCURRED)
    memory.refresh_from_db()
    assert memory.expired_at is not None


def test_becoming_long_lived_again_clears_the_expired_marker(alice):
    memory = memory_create(owner=alice, body="Old note", kind=MemoryKind.CONTEXT, occurred_at=OCCURRED)
    memory_update(memory=memory, body="Old note", kind=MemoryKind.KNOWLEDGE)
    memory.refresh_from_db()
    assert memory.expires_at is None
    assert memory.expired_at is None


def test_lifetimes_follow_settings(alice, settings):
    settings.MEMORY_KIND_LIFETIMES = {**settings.MEMORY_KIND_LIFETIMES, "event": "60", "task": "never"}
    event = memory_create(owner=alice, body="x", kind=MemoryKind.EVENT, occurred_at=OCCURRED)
    task = memory_create(owner=alice, body="y", kind=MemoryKind.TASK, occurred_at=OCCURRED)
    event.refresh_from_db()
    task.refresh_from_db()
    assert event.expires_at == OCCURRED + timedelta(days=60)
    assert task.expires_at is None


@pytest.mark.parametrize(
    "lifetimes",
    [{"event": "soon"}, {"event": -1}, {"event": 0}, {"meeting": 3}],
    ids=["not-a-number", "negative", "zero", "unknown-kind"],
)
def test_bad_lifetime_settings_are_refused_clearly(settings, lifetimes):
    settings.MEMORY_KIND_LIFETIMES = lifetimes
    with pytest.raises(ImproperlyConfigured, match="MEMORY_KIND_LIFETIMES"):
        kind_lifetimes()


def test_kinds_missing_from_settings_never_expire(settings):
    settings.MEMORY_KIND_LIFETIMES = {"task": 1}
    assert memory_expires_at(kind=MemoryKind.EVENT, occurred_at=OCCURRED) is None
    assert memory_expires_at(kind=MemoryKind.TASK, occurred_at=OCCURRED) == OCCURRED + timedelta(days=1)


# --- Marking expiry (the beat task's service) ------------------------------------------


def test_marking_expiry_respects_the_exact_boundary_and_deletes_nothing(alice):
    occurred = timezone.now()
    memory = memory_create(
        owner=alice, body="Bob looked tired", kind=MemoryKind.OBSERVATION, occurred_at=occurred
    )
    boundary = occurred + timedelta(days=3)

    assert memories_mark_expired(now=boundary - timedelta(microseconds=1)) == 0
    memory.refresh_from_db()
    assert memory.expired_at is None

    assert memories_mark_expired(now=boundary) == 1
    memory.refresh_from_db()
    assert memory.expired_at == boundary
    assert Memory.objects.filter(owner=alice).count() == 1


def test_marking_expiry_twice_marks_once(alice):
    occurred = timezone.now()
    memory_create(owner=alice, body="Busy week", kind=MemoryKind.CONTEXT, occurred_at=occurred)
    later = occurred + timedelta(days=8)
    assert memories_mark_expired(now=later) == 1
    assert memories_mark_expired(now=later + timedelta(hours=1)) == 0
    assert Memory.objects.get(owner=alice).expired_at == later


def test_beat_task_marks_expired_memories_and_keeps_them(alice, settings):
    assert settings.CELERY_BEAT_SCHEDULE["memories-mark-expired"]["task"] == tasks.mark_expired.name
    now = timezone.now()
    expired = memory_create(
        owner=alice, body="Bob looked tired", kind=MemoryKind.OBSERVATION, occurred_at=now - timedelta(days=4)
    )
    Memory.objects.filter(pk=expired.pk).update(expired_at=None)  # saved before the beat ran
    live = memory_create(owner=alice, body="Bob looks well", kind=MemoryKind.OBSERVATION, occurred_at=now)

    assert tasks.mark_expired() == 1

    assert Memory.objects.get(pk=expired.pk).expired_at is not None
    assert Memory.objects.get(pk=live.pk).expired_at is None
    assert Memory.objects.filter(owner=alice).count() == 2


# --- The owner's journal keeps expired memories -------------------------------------------


def test_owner_journal_keeps_expired_memories_and_can_filter_them(alice):
    now = timezone.now()
    just_expired = memory_create(
        owner=alice, body="seen", kind=MemoryKind.OBSERVATION, occurred_at=now - timedelta(days=3, seconds=1)
    )
    about_to_expire = memory_create(
        owner=alice,
        body="still fresh",
        kind=MemoryKind.OBSERVATION,
        occurred_at=now - timedelta(days=3) + timedelta(minutes=5),
    )
    forever = memory_create(owner=alice, body="Paris is in France", kind=MemoryKind.KNOWLEDGE)

    everything = set(memory_list(owner=alice))
    assert {just_expired, about_to_expire, forever} <= everything
    assert set(memory_list(owner=alice, filters=MemoryFilters(expired=True))) == {just_expired}
    assert set(memory_list(owner=alice, filters=MemoryFilters(expired=False))) == {about_to_expire, forever}


def test_agent_search_drops_a_memory_once_it_expires_and_the_owner_keeps_it(alice):
    now = timezone.now()
    expired = memory_create(
        owner=alice,
        body="Bob looked tired after sailing",
        kind=MemoryKind.OBSERVATION,
        occurred_at=now - timedelta(days=3, seconds=1),
    )
    live = memory_create(
        owner=alice,
        body="Bob looked happy after sailing",
        kind=MemoryKind.OBSERVATION,
        occurred_at=now - timedelta(days=3) + timedelta(minutes=5),
    )

    agent_hits = retrieval.memory_search(alice, "sailing", respect_consent=True)
    owner_hits = retrieval.memory_search(alice, "sailing", respect_consent=False)

    assert [hit.memory for hit in agent_hits] == [live]
    assert {hit.memory for hit in owner_hits} == {expired, live}


# --- Kind inference ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Remind me to call the plumber", MemoryKind.TASK),
        ("Need to renew Bob's passport", MemoryKind.TASK),
        ("TODO: buy a birthday present for Anna", MemoryKind.TASK),
        ("Anna loves jazz and hates techno", MemoryKind.PREFERENCE),
        ("Bob prefers tea to coffee", MemoryKind.PREFERENCE),
        ("Remind me that Anna likes tulips", MemoryKind.TASK),  # reminders win over tastes
        ("Carla is my sister", MemoryKind.RELATIONSHIP),
        ("Anna and Tom got married in June", MemoryKind.RELATIONSHIP),
        ("Tom is Anna's husband", MemoryKind.RELATIONSHIP),
        ("I was born in Lyon", MemoryKind.IDENTITY),
        ("Bob works as a nurse", MemoryKind.IDENTITY),
        ("Bob seemed tired", MemoryKind.OBSERVATION),
        ("We went to the lake yesterday", MemoryKind.EVENT),
        ("Anna's wedding was beautiful", MemoryKind.EVENT),
        ("Today the whole house has the flu", MemoryKind.CONTEXT),
        ("I'm working from the café this week", MemoryKind.CONTEXT),
        ("The capital of Australia is Canberra", MemoryKind.KNOWLEDGE),
    ],
)
def test_kind_is_inferred_by_the_documented_rules(text, kind):
    assert infer_kind(body=text).kind == kind


def test_inferred_kind_says_which_words_decided_it():
    guess = infer_kind(body="Remind me to water the plants")
    assert "Remind me" in guess.reason
    assert infer_kind(body="Water boils at 100 degrees").reason == "no rule matched"


def test_memory_without_a_kind_gets_the_inferred_one_and_its_lifetime(alice):
    memory = memory_create(owner=alice, body="Remind me to call Bob", occurred_at=OCCURRED)
    memory.refresh_from_db()
    assert memory.kind == MemoryKind.TASK
    assert memory.expires_at == OCCURRED + timedelta(days=14)


def test_explicit_kind_wins_over_inference(alice):
    memory = memory_create(owner=alice, body="Remind me to call Bob", kind=MemoryKind.KNOWLEDGE)
    memory.refresh_from_db()
    assert memory.kind == MemoryKind.KNOWLEDGE
    assert memory.expires_at is None


def test_update_without_a_kind_infers_from_the_new_text(alice):
    memory = memory_create(owner=alice, body="Paris is lovely", kind=MemoryKind.KNOWLEDGE)
    memory_update(memory=memory, body="Need to book the Paris train")
    memory.refresh_from_db()
    assert memory.kind == MemoryKind.TASK


def test_unknown_explicit_kind_is_still_refused(alice):
    with pytest.raises(ValidationError) as excinfo:
        memory_create(owner=alice, body="x", kind="gossip")
    assert "kind" in excinfo.value.message_dict
    assert not Memory.objects.filter(owner=alice).exists()
