from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from people.models import ConsentEvent, ConsentStatus, Person, PersonLinkInvite


def person_list(*, owner: AbstractBaseUser, consent_status: str | None = None) -> QuerySet[Person]:
    people = Person.objects.filter(owner=owner).annotate(memory_count=Count("participations"))
    if consent_status:
        people = people.filter(consent_status=consent_status)
    return people


def person_get(*, owner: AbstractBaseUser, person_id: object) -> Person:
    """The owner's person, or 404 — another owner's person does not exist for you."""
    return get_object_or_404(Person, owner=owner, pk=person_id)


def person_list_for_agents(*, owner: AbstractBaseUser) -> QuerySet[Person]:
    """The people an agent may know of: those who granted consent for agents.

    Anyone else does not exist for an agent: not listed, not found by id or name,
    and answered exactly like an id or a name that nobody has.
    """
    return Person.objects.filter(owner=owner, consent_status=ConsentStatus.GRANTED)


def person_get_for_agents(*, owner: AbstractBaseUser, person_id: object) -> Person:
    """The person if an agent may know of them, or 404 — the same 404 as for no one."""
    return get_object_or_404(person_list_for_agents(owner=owner), pk=person_id)


def person_consent_events(*, person: Person) -> QuerySet[ConsentEvent]:
    return ConsentEvent.objects.filter(person=person).select_related("actor")


def person_name_taken(*, owner: AbstractBaseUser, display_name: str) -> bool:
    """Whether the owner already has someone by this name (case-insensitive)."""
    return Person.objects.filter(owner=owner, display_name__iexact=display_name.strip()).exists()


def person_link_invites_open(*, person: Person) -> QuerySet[PersonLinkInvite]:
    """The person's link invitations that still work (not used, withdrawn or expired), newest first."""
    return person.link_invites.filter(used_at=None, revoked_at=None, expires_at__gt=timezone.now())


def person_link_invite_get(
    *, owner: AbstractBaseUser, person_id: object, invite_id: object
) -> PersonLinkInvite:
    """One of the owner's link invitations for their person, or 404."""
    person = person_get(owner=owner, person_id=person_id)
    return get_object_or_404(person.link_invites.select_related("person"), pk=invite_id)
