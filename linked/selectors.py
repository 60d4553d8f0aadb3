"""Reads for linked people (SPEC §4): the owner's open link invitations, and My consents —
every journal that links a user, each audience's consent and counts (never a memory).

Every person and request here is found through a getter that 404s unless it is the
caller's own (the owner's invitation) or linked to the caller (My consents).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils import timezone

from agents.models import ConsentRequest, ConsentRequestStatus
from circles.selectors import AudienceConsent, person_audience_consents
from memories.gate import memories_a_decision_covers
from people.models import AGENTS_AUDIENCE, Person, PersonLinkInvite
from people.selectors import person_get

# --- link invitations (the owner's side) ---------------------------------------------------------


def person_link_invites_open(*, person: Person) -> QuerySet[PersonLinkInvite]:
    """The person's link invitations that still work (not used, withdrawn or expired), newest first."""
    return person.link_invites.filter(used_at=None, revoked_at=None, expires_at__gt=timezone.now())


def person_link_invite_get(
    *, owner: AbstractBaseUser, person_id: object, invite_id: object
) -> PersonLinkInvite:
    """One of the owner's link invitations for their person, or 404."""
    person = person_get(owner=owner, person_id=person_id)
    return get_object_or_404(person.link_invites.select_related("person"), pk=invite_id)


# --- My consents: what a linked person decides, per journal and audience ----------------------


@dataclass
class LinkedAudience:
    consent: AudienceConsent
    memory_count: int  # how many of the owner's memories they are in, for this audience: a count only


@dataclass
class LinkedPerson:
    person: Person
    audiences: list[LinkedAudience]
    pending_requests: list


@dataclass
class LinkedJournal:
    owner: AbstractBaseUser
    people: list[LinkedPerson]


def linked_consents_for_user(*, user: AbstractBaseUser) -> list[LinkedJournal]:
    """Every journal that links `user`, with each audience's consent and counts (never memory text).

    Counts per audience: what the person's decision for it covers, as the gate says
    (memories.gate.memories_a_decision_covers): the owner's memories they are in (as a
    participant or who told it); for a circle, those of them shared into it.
    """
    people = (
        Person.objects.filter(linked_user=user, is_self=False)
        .exclude(owner=user)
        .select_related("owner")
        .order_by("owner__username", "display_name", "pk")
    )
    journals: dict[int, LinkedJournal] = {}
    for person in people:
        audiences = []
        for consent in person_audience_consents(person=person):
            circle_id = consent.circle.pk if consent.circle is not None else None
            count = memories_a_decision_covers(person, circle_id).count()
            audiences.append(LinkedAudience(consent=consent, memory_count=count))
        requests = list(
            ConsentRequest.objects.filter(person=person, status=ConsentRequestStatus.PENDING).select_related(
                "agent"
            )
        )
        journal = journals.setdefault(person.owner_id, LinkedJournal(owner=person.owner, people=[]))
        journal.people.append(LinkedPerson(person=person, audiences=audiences, pending_requests=requests))
    return list(journals.values())


def linked_person_get(*, user: AbstractBaseUser, person_id: object) -> Person:
    """A person (in someone else's journal) linked to `user`, or 404."""
    try:
        uuid.UUID(str(person_id))
    except ValueError:
        raise Http404("No such person.") from None
    return get_object_or_404(
        Person.objects.filter(linked_user=user, is_self=False).exclude(owner=user).select_related("owner"),
        pk=person_id,
    )


def linked_person_audiences(*, person: Person) -> set[str]:
    """The audiences a linked person may decide for: their owner's agents and the owner's circles."""
    return {consent.audience for consent in person_audience_consents(person=person)}


def linked_audience_label(*, consent: AudienceConsent, owner: AbstractBaseUser) -> str:
    """An audience as the linked person reads it: "alice's agents", or the circle's name."""
    return f"{owner.get_username()}'s agents" if consent.audience == AGENTS_AUDIENCE else consent.label


def consent_request_get_for_linked_user(
    *, user: AbstractBaseUser, consent_request_id: object
) -> ConsentRequest:
    """A request about a person (in someone else's journal) linked to `user`, or 404."""
    return get_object_or_404(
        ConsentRequest.objects.filter(person__linked_user=user, person__is_self=False)
        .exclude(person__owner=user)
        .select_related("person", "person__owner", "agent"),
        pk=consent_request_id,
    )
