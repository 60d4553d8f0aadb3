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

from memories.models import Memory, MemoryParticipant
from memories.retrieval import agent_visible_memories
from memories.selectors import MemoryFilters, memory_apply_filters
from people.models import Person


def _with_people(memories: QuerySet[Memory]) -> QuerySet[Memory]:
    return memories.select_related("source_person").prefetch_related(
        Prefetch(
            "participants",
            queryset=MemoryParticipant.objects.select_related("person").order_by("person__display_name"),
        )
    )


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _alias_matches(pattern: str, *, partial: bool) -> RawSQL:
    # aliases is a text[]: match any element, case-insensitively, in SQL.
    condition = "alias ILIKE %s" if partial else "lower(alias) = lower(%s)"
    return RawSQL(
        f"EXISTS (SELECT 1 FROM unnest(people_person.aliases) AS alias WHERE {condition})",
        (pattern,),
        output_field=BooleanField(),
    )


def mcp_people_named(*, owner: AbstractBaseUser, name: str, limit: int = 5) -> list[Person]:
    """The owner's people called `name` (display name or alias, any case).

    Exact matches win; only when there are none do partial matches ("Bob" for
    "Bob Marsh") count. At most `limit` people, in display-name order.
    """
    people = Person.objects.filter(owner=owner)
    exact = people.annotate(alias_match=_alias_matches(name, partial=False)).filter(
        Q(display_name__iexact=name) | Q(alias_match=True)
    )
    found = list(exact.order_by("display_name", "pk")[:limit])
    if found:
        return found
    pattern = f"%{_escape_like(name)}%"
    partial = people.annotate(alias_match=_alias_matches(pattern, partial=True)).filter(
        Q(display_name__icontains=name) | Q(alias_match=True)
    )
    return list(partial.order_by("display_name", "pk")[:limit])


def mcp_person_memories(*, owner: AbstractBaseUser, person: Person, limit: int) -> tuple[list[Memory], int]:
    """Gated memories `person` takes part in, newest first (at most `limit`), and how many there are."""
    memories = memory_apply_filters(agent_visible_memories(owner), MemoryFilters(person=person))
    newest = _with_people(memories).order_by("-occurred_at", "-created_at", "pk")[:limit]
    return list(newest), memories.count()


def mcp_timeline_window(
    *, owner: AbstractBaseUser, start: date, end: date, limit: int
) -> tuple[list[Memory], bool]:
    """Gated memories that happened from `start` to `end` (whole days), oldest first.

    Returns at most `limit` memories and whether more (gated) ones fall in the window.
    """
    memories = memory_apply_filters(
        agent_visible_memories(owner), MemoryFilters(date_from=start, date_to=end)
    )
    window = list(_with_people(memories).order_by("occurred_at", "created_at", "pk")[: limit + 1])
    return window[:limit], len(window) > limit


def mcp_visible_memory(*, owner: AbstractBaseUser, memory_id: uuid.UUID) -> Memory | None:
    """The memory if the gate lets agents see it; None otherwise (absent, another owner's or gated)."""
    return _with_people(agent_visible_memories(owner)).filter(pk=memory_id).first()
