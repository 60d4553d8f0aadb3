from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, Count, Exists, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce, Lower
from django.shortcuts import get_object_or_404

from people.models import ConsentEvent, Person


def person_list(*, owner: AbstractBaseUser, consent_status: str | None = None) -> QuerySet[Person]:
    """The owner's people: Self first, then by name whatever its capitals, with their memory counts.

    Self is in every memory with nobody else in it (the owner's own, as the agents' gate
    reads it), so its count adds those to the ones that name Self.
    """
    from memories.models import Memory, MemoryParticipant

    alone = (
        Memory.objects.filter(owner_id=OuterRef("owner_id"), source_person__isnull=True)
        .filter(~Exists(MemoryParticipant.objects.filter(memory_id=OuterRef("pk"))))
        .order_by()
        .values("owner_id")
        .annotate(count=Count("pk"))
        .values("count")
    )
    # CASE runs the subquery for the Self row only.
    people = Person.objects.filter(owner=owner).annotate(
        memory_count=Count("participations")
        + Case(
            When(is_self=True, then=Coalesce(Subquery(alone, output_field=IntegerField()), Value(0))),
            default=Value(0),
            output_field=IntegerField(),
        )
    )
    if consent_status:
        people = people.filter(consent_status=consent_status)
    return people.order_by("-is_self", Lower("display_name"), "display_name", "pk")


@dataclass(frozen=True)
class UpcomingBirthday:
    person: Person
    on: date
    days_away: int
    turns: int | None  # None when the year of birth is not known


def person_upcoming_birthdays(
    *, owner: AbstractBaseUser, today: date, within_days: int = 30
) -> list[UpcomingBirthday]:
    """The owner's people whose birthday falls today or in the next `within_days` days, soonest first."""
    upcoming = []
    for person in Person.objects.filter(owner=owner, birthday_month__isnull=False, is_self=False):
        birthday = person.birthday
        if birthday is None:
            continue
        on = birthday.next_on_or_after(today)
        days_away = (on - today).days
        if days_away <= within_days:
            upcoming.append(UpcomingBirthday(person, on, days_away, birthday.age_on(on)))
    return sorted(upcoming, key=lambda item: (item.on, item.person.display_name.casefold()))


def person_mention_options(*, owner: AbstractBaseUser, query: str, limit: int = 8) -> list[Person]:
    """The owner's people for an @mention typed so far: names (or aliases) starting with it first."""
    needle = " ".join(query.split()).casefold()
    starts, contains = [], []
    for person in person_list(owner=owner).filter(is_self=False):
        names = [person.display_name.casefold(), *(alias.casefold() for alias in person.aliases)]
        words = [word for name in names for word in name.split()]
        if any(name.startswith(needle) for name in names) or any(word.startswith(needle) for word in words):
            starts.append(person)
        elif any(needle in name for name in names):
            contains.append(person)
    return (starts + contains)[:limit]


def person_get(*, owner: AbstractBaseUser, person_id: object) -> Person:
    """The owner's person, or 404 — another owner's person does not exist for you."""
    return get_object_or_404(Person, owner=owner, pk=person_id)


def person_name_for_others(*, person: Person, owner_name: str) -> str:
    """A person as someone other than their journal's owner reads them (a circle's members, its agent).

    "Self" is the owner's word for themself: read by another member it would be a
    stranger called Self, so it becomes the owner's own name (`owner_name`, their
    username as circles show members).
    """
    return owner_name if person.is_self else person.display_name


def person_list_for_agents(*, owner: AbstractBaseUser) -> QuerySet[Person]:
    """The people an agent may know of: those who granted consent for agents.

    Anyone else does not exist for an agent: not listed, not found by id or name,
    and answered exactly like an id or a name that nobody has.
    """
    from memories.gate import agent_visible_people

    return agent_visible_people(owner)


def person_get_for_agents(*, owner: AbstractBaseUser, person_id: object) -> Person:
    """The person if an agent may know of them, or 404 — the same 404 as for no one."""
    return get_object_or_404(person_list_for_agents(owner=owner), pk=person_id)


def person_consent_events(*, person: Person) -> QuerySet[ConsentEvent]:
    return ConsentEvent.objects.filter(person=person).select_related("actor")


def person_name_taken(*, owner: AbstractBaseUser, display_name: str) -> bool:
    """Whether the owner already has someone by this name (case-insensitive)."""
    return Person.objects.filter(owner=owner, display_name__iexact=display_name.strip()).exists()
