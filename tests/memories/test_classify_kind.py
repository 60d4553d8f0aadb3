"""Kind inference on the lines people write, and future dates extending short lifetimes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from memories.classify_time import latest_future_date
from memories.lifecycle import infer_kind, memory_expires_at
from memories.models import MemoryKind
from memories.services import memory_create, memory_update

# A Monday.
WRITTEN = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def end_of(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 23, 59, 59, tzinfo=UTC)


# --- Kinds: labelled lines ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # Milestones stay true: not a 7-day context because they say "today".
        ("Finished the first draft of my novel today", MemoryKind.KNOWLEDGE),
        ("Finished my novel draft this morning!", MemoryKind.KNOWLEDGE),
        ("The novel draft is finally finished", MemoryKind.KNOWLEDGE),
        ("A finished novel draft, 92,000 words", MemoryKind.KNOWLEDGE),
        ("Bob published his first book", MemoryKind.KNOWLEDGE),
        ("Anna submitted her thesis today", MemoryKind.KNOWLEDGE),
        ("Anna passed her driving test this morning", MemoryKind.KNOWLEDGE),
        ("Ran my first marathon today!", MemoryKind.KNOWLEDGE),
        ("We bought our first house", MemoryKind.KNOWLEDGE),
        ("Tom got his degree in engineering", MemoryKind.KNOWLEDGE),
        # Not milestones: wanting, working on, reminders.
        ("Remind me to finish the first draft of my novel", MemoryKind.TASK),
        ("Working on the first draft this week", MemoryKind.CONTEXT),
        ("Today the whole house has the flu", MemoryKind.CONTEXT),
        # Plans are events (their lifetime starts at the date they name, below).
        ("Our wedding is planned for next year", MemoryKind.EVENT),
        ("Anna's party is next Saturday", MemoryKind.EVENT),
        ("We went to the lake yesterday", MemoryKind.EVENT),
        # The existing rules keep their order.
        ("Anna loves jazz and hates techno", MemoryKind.PREFERENCE),
        ("Carla is my sister", MemoryKind.RELATIONSHIP),
        ("Bob seemed tired", MemoryKind.OBSERVATION),
        ("The capital of Australia is Canberra", MemoryKind.KNOWLEDGE),
    ],
)
def test_kind_of_lines_people_write(text, kind):
    assert infer_kind(body=text).kind == kind, infer_kind(body=text).reason


def test_a_milestone_says_why_it_is_kept():
    assert infer_kind(body="Finished the first draft of my novel today").reason.startswith(
        "a milestone that stays true"
    )


# --- Future dates ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Our wedding is planned for next year", end_of(2027, 12, 31)),
        ("See you tomorrow", end_of(2026, 3, 3)),
        ("Back next week", end_of(2026, 3, 15)),  # the Sunday of next week
        ("Moving out next month", end_of(2026, 4, 30)),
        ("Moving house in 3 weeks", end_of(2026, 3, 23)),
        ("In a couple of months we move to Porto", end_of(2026, 5, 2)),
        ("Next summer we sail to Corsica", end_of(2026, 8, 31)),
        ("Tom starts school in September", end_of(2026, 9, 30)),
        ("Booked the dentist for 14 June", end_of(2026, 6, 14)),
        ("The concert is on June 14, 2027", end_of(2027, 6, 14)),
        ("Trip to Lisbon 2027-04-02", end_of(2027, 4, 2)),
        ("We hope to retire by 2031", end_of(2031, 12, 31)),
        ("Flying out tomorrow, back in June 2026", end_of(2026, 6, 30)),  # the latest one counts
    ],
)
def test_latest_future_date_named_in_the_text(text, expected):
    assert latest_future_date(text=text, after=WRITTEN) == expected


@pytest.mark.parametrize(
    "text",
    [
        "We went to Rome in May",  # a month without a year and nothing ahead: a past May
        "We got married in 2019",
        "This may take a while",
        "Dinner for 2000 people, a record",  # not a year
        "Last year was hard",
        "Finished the first draft of my novel today",
    ],
)
def test_no_future_date_in_the_text(text):
    assert latest_future_date(text=text, after=WRITTEN) is None


def test_next_year_is_relative_to_the_memorys_own_date_not_the_clock():
    in_2019 = datetime(2019, 7, 1, 12, 0, tzinfo=UTC)
    assert latest_future_date(text="The wedding is planned for next year", after=in_2019) == end_of(
        2020, 12, 31
    )


def test_a_far_future_year_is_ignored():
    assert latest_future_date(text="A time capsule to open in 2999", after=WRITTEN) is None


# --- Lifetimes ------------------------------------------------------------------------------


def test_a_future_date_in_the_text_moves_the_start_of_a_short_lifetime():
    assert memory_expires_at(
        kind=MemoryKind.EVENT, occurred_at=WRITTEN, text="Our wedding is planned for next year"
    ) == end_of(2027, 12, 31) + timedelta(days=30)
    # Long-lived kinds stay long-lived, and a text with no future date changes nothing.
    assert memory_expires_at(kind=MemoryKind.KNOWLEDGE, occurred_at=WRITTEN, text="next year") is None
    assert memory_expires_at(
        kind=MemoryKind.EVENT, occurred_at=WRITTEN, text="Dinner"
    ) == WRITTEN + timedelta(days=30)


def test_a_wedding_planned_for_next_year_does_not_expire_next_month(alice):
    now = timezone.now()
    memory = memory_create(owner=alice, body="Anna and Tom's wedding is planned for next year")
    memory.refresh_from_db()
    assert memory.kind == MemoryKind.EVENT
    assert memory.expires_at > now.replace(year=now.year + 1, month=12, day=28)
    assert memory.expired_at is None


def test_an_explicit_kind_keeps_the_extended_lifetime_too(alice):
    memory = memory_create(
        owner=alice,
        body="Booked the band for the wedding in June 2027",
        kind=MemoryKind.TASK,
        occurred_at=WRITTEN,
    )
    memory.refresh_from_db()
    assert memory.expires_at == end_of(2027, 6, 30) + timedelta(days=14)


def test_an_old_entry_about_its_next_year_is_expired_now(alice):
    memory = memory_create(
        owner=alice,
        body="The wedding is planned for next year",
        occurred_at=datetime(2019, 7, 1, 12, 0, tzinfo=UTC),
    )
    memory.refresh_from_db()
    assert memory.expires_at == end_of(2020, 12, 31) + timedelta(days=30)
    assert memory.expired_at is not None


def test_editing_the_text_recomputes_the_extension(alice):
    memory = memory_create(owner=alice, body="Party next month", kind=MemoryKind.EVENT, occurred_at=WRITTEN)
    memory_update(memory=memory, body="Party, lovely", kind=MemoryKind.EVENT, occurred_at=WRITTEN)
    memory.refresh_from_db()
    assert memory.expires_at == WRITTEN + timedelta(days=30)


def test_a_finished_novel_draft_is_kept_not_a_week_long_context(alice):
    memory = memory_create(owner=alice, body="Finished the first draft of my novel today")
    memory.refresh_from_db()
    assert (memory.kind, memory.expires_at) == (MemoryKind.KNOWLEDGE, None)
