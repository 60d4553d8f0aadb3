from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, time

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import TruncDate
from django.shortcuts import get_object_or_404
from django.utils import timezone

from memories.lifecycle import expired_q
from memories.models import Memory, MemoryParticipant
from memories.supersession import memory_supersession_chain
from people.models import Person


@dataclass(frozen=True)
class MemoryFilters:
    person: Person | None = None
    kind: str | None = None
    date_from: date | None = None
    date_to: date | None = None
    # True: only expired memories; False: only live ones; None: both (the journal keeps expired ones).
    expired: bool | None = None


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def _end_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.max))


def memory_apply_filters(memories: QuerySet[Memory], filters: MemoryFilters | None) -> QuerySet[Memory]:
    if filters is None:
        return memories
    if filters.person is not None:
        memories = memories.filter(participants__person=filters.person)
    if filters.kind:
        memories = memories.filter(kind=filters.kind)
    if filters.date_from:
        memories = memories.filter(occurred_at__gte=_start_of(filters.date_from))
    if filters.date_to:
        memories = memories.filter(occurred_at__lte=_end_of(filters.date_to))
    if filters.expired is not None:
        memories = memories.filter(expired_q()) if filters.expired else memories.exclude(expired_q())
    return memories


# What a list of memories never shows, left in the database (Memory.embedding stays
# loadable: reading it from a listed memory costs one query of its own).
LIST_DEFERRED = ("embedding", "search_vector")


def _with_people(memories: QuerySet[Memory], *, owner: AbstractBaseUser) -> QuerySet[Memory]:
    """`owner`'s `memories` with their people and the owner's Self consent (owner_self_status)."""
    # Not correlated with each row (OuterRef("owner_id")): every row is the owner's, and
    # PostgreSQL then reads Self once per statement, not once per row it walks — a page
    # at offset 100 ran it 120 times (13 of the page's 14 ms, EXPLAIN ANALYZE under load).
    own_self = Person.objects.filter(owner=owner, is_self=True).order_by().values("consent_status")[:1]
    return (
        memories.select_related("source_person")
        .annotate(owner_self_status=Subquery(own_self))
        .prefetch_related(
            Prefetch(
                "participants",
                queryset=MemoryParticipant.objects.select_related("person").order_by("person__display_name"),
            )
        )
    )


def memory_list(*, owner: AbstractBaseUser, filters: MemoryFilters | None = None) -> QuerySet[Memory]:
    """The owner's whole journal, newest first. Owner view: nothing is gated.

    Without the vector and the full-text copy, which no list shows: a page of 20
    read and parsed 20 × 384 numbers as text (~2 ms of a ~20 ms API page).
    """
    memories = memory_apply_filters(Memory.objects.filter(owner=owner), filters)
    return _with_people(memories, owner=owner).defer(*LIST_DEFERRED).order_by("-occurred_at", "-created_at")


def memory_get(*, owner: AbstractBaseUser, memory_id: object) -> Memory:
    """The owner's memory, or 404 — another owner's memory does not exist for you."""
    return get_object_or_404(_with_people(Memory.objects.filter(owner=owner), owner=owner), pk=memory_id)


def memory_supersede_options(*, memory: Memory, query: str = "", limit: int = 30) -> list[Memory]:
    """The owner's older memories that `memory` could be marked as replacing, newest first.

    Only those memory_supersede would accept: same owner and sensitivity, not
    already replaced, and not already linked to `memory` (a no-op or a loop); and
    only older ones (happened no later than `memory`): a memory replaces what came before it.
    Each word of `query` must appear in the title or the body.
    """
    linked = [linked_memory.pk for linked_memory in memory_supersession_chain(memory)]
    options = Memory.objects.filter(
        owner_id=memory.owner_id,
        sensitivity=memory.sensitivity,
        superseded_by__isnull=True,
        occurred_at__lte=memory.occurred_at,
    ).exclude(pk__in=linked)
    for word in query.split()[:10]:
        options = options.filter(Q(title__icontains=word) | Q(body__icontains=word))
    return list(options.order_by("-occurred_at", "-created_at")[:limit])


# --- The owner's calendar and "On this day" (owner views: nothing is gated) --------------------


def memory_day_counts(*, owner: AbstractBaseUser, first: date, last: date) -> dict[date, int]:
    """How many of the owner's memories fall on each day from `first` to `last` (local days)."""
    rows = (
        Memory.objects.filter(owner=owner, occurred_at__gte=_start_of(first), occurred_at__lte=_end_of(last))
        .annotate(day=TruncDate("occurred_at", tzinfo=timezone.get_current_timezone()))
        .values("day")
        .annotate(count=Count("pk"))
        .order_by()
    )
    return {row["day"]: row["count"] for row in rows}


def memory_on_this_day(*, owner: AbstractBaseUser, day: date) -> QuerySet[Memory]:
    """The owner's memories from this month and day in earlier years, newest year first.

    On 28 February of a year without a 29th, memories of 29 February come too.
    """
    same_day = Q(occurred_at__month=day.month, occurred_at__day=day.day)
    if (day.month, day.day) == (2, 28) and not calendar.isleap(day.year):
        same_day |= Q(occurred_at__month=2, occurred_at__day=29)
    memories = Memory.objects.filter(
        same_day, owner=owner, occurred_at__lt=_start_of(day.replace(month=1, day=1))
    )
    return _with_people(memories, owner=owner).order_by("-occurred_at", "-created_at")
