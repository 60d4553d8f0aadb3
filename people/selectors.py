from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404

from people.models import ConsentEvent, Person


def person_list(*, owner: AbstractBaseUser, consent_status: str | None = None) -> QuerySet[Person]:
    people = Person.objects.filter(owner=owner).annotate(memory_count=Count("participations"))
    if consent_status:
        people = people.filter(consent_status=consent_status)
    return people


def person_get(*, owner: AbstractBaseUser, person_id: object) -> Person:
    """The owner's person, or 404 — another owner's person does not exist for you."""
    return get_object_or_404(Person, owner=owner, pk=person_id)


def person_consent_events(*, person: Person) -> QuerySet[ConsentEvent]:
    return ConsentEvent.objects.filter(person=person).select_related("actor")


def person_name_taken(*, owner: AbstractBaseUser, display_name: str) -> bool:
    """Whether the owner already has someone by this name (case-insensitive)."""
    return Person.objects.filter(owner=owner, display_name__iexact=display_name.strip()).exists()
