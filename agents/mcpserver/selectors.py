"""Reads behind the MCP tools. Every memory read starts from the one consent gate.

`memories.retrieval.agent_visible_memories(owner)` decides what an agent may see;
nothing here re-implements any part of it, it only narrows (by person, by dates, by
id) and orders what the gate let through, inside the same SQL statement.
"""

from __future__ import annotations

import uuid
from datetime import date

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import BooleanField, Prefetch, Q, QuerySet
from django.db.models.expressions import RawSQL

from memories.gate import agent_visible_memories
from memories.models import Memory, MemoryParticipant
from memories.selectors import LIST_DEFERRED, MemoryFilters, memory_apply_filters
from people.models import Person
from people.selectors import person_list_for_agents


def _with_people(memories: QuerySet[Memory]) -> QuerySet[Memory]:
    return memories.select_related("source_person").prefetch_related(
        Prefetch(
            "participants",
            queryset=MemoryParticipant.objects.select_related("person").order_by("person__display_name"),
        )
    )


def _has_alias(name: str) -> RawSQL:
    # aliases is a text[]: any element equal to `name`, case-insensitively, in SQL.
    return RawSQL(
        "EXISTS (SELECT 1 FROM unnest(people_person.aliases) AS alias WHERE lower(alias) = lower(%s))",
        (name,),
        output_field=BooleanField(),
    )


def mcp_people_named(*, owner: AbstractBaseUser, name: str, limit: int = 5) -> list[Person]:
    """The people an agent may know of called exactly `name` (display name or alias, any case).

    Only whole names match: a fragment would let an agent probe hidden aliases letter
    by letter. People who have not granted consent are not searched at all, so a
    hidden person and no one give the same answer. At most `limit`, by display name.
    """
    people = person_list_for_agents(owner=owner).annotate(alias_match=_has_alias(name))
    named = people.filter(Q(display_name__iexact=name) | Q(alias_match=True))
    return list(named.order_by("display_name", "pk")[:limit])


def mcp_person_memories(
    *, owner: AbstractBaseUser, person: Person, limit: int, may_read_sensitive: bool = False
) -> tuple[list[Memory], int]:
    """Gated memories `person` takes part in, newest first (at most `limit`), and how many there are."""
    memories = memory_apply_filters(
        agent_visible_memories(owner, may_read_sensitive=may_read_sensitive), MemoryFilters(person=person)
    )
    newest = (
        _with_people(memories).defer(*LIST_DEFERRED).order_by("-occurred_at", "-created_at", "pk")[:limit]
    )
    return list(newest), memories.count()


def mcp_timeline_window(
    *, owner: AbstractBaseUser, start: date, end: date, limit: int, may_read_sensitive: bool = False
) -> tuple[list[Memory], bool]:
    """Gated memories that happened from `start` to `end` (whole days), oldest first.

    Returns at most `limit` memories and whether more (gated) ones fall in the window.
    """
    memories = memory_apply_filters(
        agent_visible_memories(owner, may_read_sensitive=may_read_sensitive),
        MemoryFilters(date_from=start, date_to=end),
    )
    window = list(
        _with_people(memories).defer(*LIST_DEFERRED).order_by("occurred_at", "created_at", "pk")[: limit + 1]
    )
    return window[:limit], len(window) > limit


def mcp_visible_memory(
    *, owner: AbstractBaseUser, memory_id: uuid.UUID, may_read_sensitive: bool = False
) -> Memory | None:
    """The memory if the gate lets agents see it; None otherwise (absent, another owner's or gated)."""
    scope = agent_visible_memories(owner, may_read_sensitive=may_read_sensitive)
    return _with_people(scope).filter(pk=memory_id).first()


def mcp_circle_timeline_window(
    *, circle, viewer: AbstractBaseUser, start: date, end: date, limit: int, may_read_sensitive: bool = False
) -> tuple[list[Memory], bool]:
    """What the viewer's agent may see in the circle (the gate's circle case, for an agent), oldest first."""
    from memories.gate import circle_visible_memories

    memories = memory_apply_filters(
        circle_visible_memories(
            circle.pk, [viewer.pk], for_agent=True, may_read_sensitive=may_read_sensitive
        ),
        MemoryFilters(date_from=start, date_to=end),
    )
    window = list(
        _with_people(memories)
        .select_related("owner")
        .order_by("occurred_at", "created_at", "pk")[: limit + 1]
    )
    return window[:limit], len(window) > limit
