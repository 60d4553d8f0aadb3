"""Writes for circles: the circle, its members, invites, join requests and shares.

Reads (and the consent gate for members) live in circles/selectors.py and
memories/retrieval.py. Every refusal is a ValidationError (or a subclass) whose
message a person can act on; nothing is written when one is raised.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from agents.models import AccessSurface, Agent
from agents.services import access_log_insert
from circles.models import (
    CIRCLE_DESCRIPTION_MAX_LENGTH,
    CIRCLE_NAME_MAX_LENGTH,
    MAX_MEMBERS,
    Circle,
    CircleInvite,
    CircleMembership,
    JoinRequest,
    JoinRequestStatus,
    MembershipRole,
    MemoryShare,
)
from inbox.models import NotificationKind
from inbox.services import notify, notify_many
from memories.gate import circle_consent_blockers
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import Person, PersonConsent, circle_audience

INVITE_DEFAULT_DAYS = 14
INVITE_MAX_DAYS = 90


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# --- circles -------------------------------------------------------------------------


def _clean_circle_fields(*, name: str, description: str) -> tuple[str, str]:
    name = " ".join((name or "").split())
    description = (description or "").strip()
    errors = {}
    if not name:
        errors["name"] = "Give the circle a name."
    elif len(name) > CIRCLE_NAME_MAX_LENGTH:
        errors["name"] = f"A circle's name is at most {CIRCLE_NAME_MAX_LENGTH} characters."
    if len(description) > CIRCLE_DESCRIPTION_MAX_LENGTH:
        errors["description"] = f"A description is at most {CIRCLE_DESCRIPTION_MAX_LENGTH} characters."
    if errors:
        raise ValidationError(errors)
    return name, description


@transaction.atomic
def circle_create(*, owner: AbstractBaseUser, name: str, description: str = "") -> Circle:
    name, description = _clean_circle_fields(name=name, description=description)
    circle = Circle.objects.create(owner=owner, name=name, description=description)
    CircleMembership.objects.create(circle=circle, user=owner, role=MembershipRole.OWNER)
    return circle


def _require_owner(circle: Circle, user: AbstractBaseUser) -> None:
    if circle.owner_id != user.pk:
        raise PermissionDenied("Only the circle's owner can do that.")


def circle_update(
    *,
    circle: Circle,
    by: AbstractBaseUser,
    name: str | None = None,
    description: str | None = None,
    agents_may_read: bool | None = None,
) -> Circle:
    _require_owner(circle, by)
    new_name, new_description = _clean_circle_fields(
        name=circle.name if name is None else name,
        description=circle.description if description is None else description,
    )
    circle.name, circle.description = new_name, new_description
    if agents_may_read is not None:
        circle.agents_may_read = bool(agents_may_read)
    circle.save(update_fields=["name", "description", "agents_may_read", "updated_at"])
    return circle


@transaction.atomic
def circle_delete(*, circle: Circle, by: AbstractBaseUser) -> None:
    """Delete the circle with its memberships, invites, requests and shares — never a memory.

    The per-audience consents given for it go too (the audience no longer exists);
    their history stays in the consent events. Its members, and whoever was waiting
    to join, are told (the circle's name and its owner's are all they learn: they knew both).
    """
    _require_owner(circle, by)
    members = list(circle.memberships.exclude(user_id=by.pk).values_list("user_id", flat=True))
    waiting = list(
        circle.join_requests.filter(status=JoinRequestStatus.PENDING).values_list("user_id", flat=True)
    )
    PersonConsent.objects.filter(audience=circle_audience(circle.pk)).delete()
    owner, name = by.get_username(), circle.name
    circle.delete()
    notify_many(
        recipients=members,
        kind=NotificationKind.CIRCLE_DELETED,
        text=f"{owner} deleted the circle {name}. Your memories stay in your journal; "
        "what you had shared there is no longer shared.",
    )
    notify_many(
        recipients=set(waiting) - set(members),
        kind=NotificationKind.CIRCLE_DELETED,
        text=f"{owner} deleted the circle {name}: your request to join it is closed.",
    )


# --- invites and join requests ---------------------------------------------------------


class InviteInvalid(ValidationError):
    """An invite token that cannot be used; the message says why."""


@dataclass(frozen=True)
class NewInvite:
    invite: CircleInvite
    token: str  # shown once; only its hash is stored


def invite_create(*, circle: Circle, by: AbstractBaseUser, days: int = INVITE_DEFAULT_DAYS) -> NewInvite:
    _require_owner(circle, by)
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= INVITE_MAX_DAYS:
        raise ValidationError({"days": f"An invite lasts from 1 to {INVITE_MAX_DAYS} days."})
    token = secrets.token_urlsafe(32)
    invite = CircleInvite.objects.create(
        circle=circle,
        token_hash=token_hash(token),
        created_by=by,
        expires_at=timezone.now() + timedelta(days=days),
    )
    return NewInvite(invite=invite, token=token)


def invite_revoke(*, invite: CircleInvite, by: AbstractBaseUser) -> CircleInvite:
    _require_owner(invite.circle, by)
    if invite.revoked_at is None:
        invite.revoked_at = timezone.now()
        invite.save(update_fields=["revoked_at"])
    return invite


def invite_check(*, token: str) -> CircleInvite:
    """The invite behind a token, or InviteInvalid saying why it cannot be used."""
    invite = (
        CircleInvite.objects.select_related("circle", "circle__owner")
        .filter(token_hash=token_hash((token or "").strip()))
        .first()
    )
    if invite is None:
        raise InviteInvalid("This invite link is not valid. Ask the circle's owner for a new one.")
    if invite.revoked_at is not None:
        raise InviteInvalid("This invite link was withdrawn by the circle's owner. Ask them for a new one.")
    if invite.expires_at <= timezone.now():
        raise InviteInvalid("This invite link has expired. Ask the circle's owner for a new one.")
    return invite


@transaction.atomic
def invite_accept(*, token: str, user: AbstractBaseUser) -> JoinRequest:
    """Ask to join the invite's circle. The owner approves or declines; asking twice is one request."""
    invite = invite_check(token=token)
    circle = Circle.objects.select_for_update().get(pk=invite.circle_id)
    if CircleMembership.objects.filter(circle=circle, user=user).exists():
        raise ValidationError(f"You are already a member of {circle.name}.")
    waiting = JoinRequest.objects.filter(circle=circle, user=user, status=JoinRequestStatus.PENDING).first()
    if waiting is not None:
        return waiting
    if circle.memberships.count() >= MAX_MEMBERS:
        raise ValidationError(f"{circle.name} is full: a circle has at most {MAX_MEMBERS} members.")
    join_request = JoinRequest.objects.create(circle=circle, user=user, invite=invite)
    # The circle's owner may know only the circle and who asks (their username).
    notify(
        recipient=circle.owner_id,
        kind=NotificationKind.JOIN_REQUEST,
        text=f"{user.get_username()} asks to join {circle.name}.",
        url=f"/circles/{circle.pk}/",
    )
    return join_request


def _decide(request: JoinRequest, by: AbstractBaseUser) -> JoinRequest:
    _require_owner(request.circle, by)
    locked = JoinRequest.objects.select_for_update().get(pk=request.pk)
    if locked.status != JoinRequestStatus.PENDING:
        raise ValidationError(f"This request was already {locked.get_status_display().lower()}.")
    return locked


@transaction.atomic
def join_request_approve(*, request: JoinRequest, by: AbstractBaseUser) -> CircleMembership:
    locked = _decide(request, by)
    circle = Circle.objects.select_for_update().get(pk=locked.circle_id)
    if circle.memberships.count() >= MAX_MEMBERS:
        raise ValidationError(f"{circle.name} is full: a circle has at most {MAX_MEMBERS} members.")
    locked.status = JoinRequestStatus.APPROVED
    locked.decided_at = timezone.now()
    locked.save(update_fields=["status", "decided_at"])
    membership, _ = CircleMembership.objects.get_or_create(
        circle=circle, user_id=locked.user_id, defaults={"role": MembershipRole.MEMBER}
    )
    request.status, request.decided_at = locked.status, locked.decided_at
    # The one who asked knows the circle's name and its owner's (the invite page showed both).
    notify(
        recipient=locked.user_id,
        kind=NotificationKind.JOIN_APPROVED,
        text=f"{by.get_username()} approved your request: you are now a member of {circle.name}.",
        url=reverse("circle_detail", args=[circle.pk]),
    )
    return membership


@transaction.atomic
def join_request_decline(*, request: JoinRequest, by: AbstractBaseUser) -> JoinRequest:
    locked = _decide(request, by)
    locked.status = JoinRequestStatus.DECLINED
    locked.decided_at = timezone.now()
    locked.save(update_fields=["status", "decided_at"])
    request.status, request.decided_at = locked.status, locked.decided_at
    notify(
        recipient=locked.user_id,
        kind=NotificationKind.JOIN_DECLINED,
        text=f"{by.get_username()} declined your request to join {request.circle.name}.",
    )
    return locked


@transaction.atomic
def membership_remove(*, circle: Circle, user_id: int, by: AbstractBaseUser) -> None:
    """The owner removes a member, or a member leaves (user_id is their own).

    Takes effect on the next request: the gate reads memberships in every query.
    Their memories stay theirs; what they had shared into the circle is unshared,
    since only members share into a circle.
    """
    if user_id != by.pk:
        _require_owner(circle, by)
    if user_id == circle.owner_id:
        raise ValidationError(
            "The owner cannot leave their own circle; delete the circle instead."
            if user_id == by.pk
            else "The circle's owner cannot be removed."
        )
    deleted, _ = CircleMembership.objects.filter(circle=circle, user_id=user_id).delete()
    if not deleted:
        raise ValidationError("That person is not a member of this circle.")
    MemoryShare.objects.filter(circle=circle, memory__owner_id=user_id).delete()
    if user_id != by.pk:  # removed, not left: they did not do it themselves, so they are told
        notify(
            recipient=user_id,
            kind=NotificationKind.CIRCLE_REMOVED,
            text=f"{by.get_username()} removed you from {circle.name}. Your memories stay in your journal; "
            "what you had shared there is no longer shared.",
        )


# --- sharing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class NotConsented:
    person: Person
    status: str


class ShareRefused(ValidationError):
    """Someone in the memory has not consented to the circle; names each, writes nothing."""

    def __init__(self, circle: Circle, not_consented: list[NotConsented]) -> None:
        self.circle = circle
        self.not_consented = not_consented
        names = ", ".join(f"{item.person.display_name} ({item.status})" for item in not_consented)
        super().__init__(f"Not shared into {circle.name}: not everyone in it has consented — {names}.")


def share_blockers(*, memory: Memory, circle: Circle) -> list[NotConsented]:
    """Everyone in the memory (participants and who told it) not granted for the circle: the gate's answer."""
    return [
        NotConsented(person=person, status=status)
        for person, status in circle_consent_blockers(memory, circle.pk)
    ]


def _require_sharer(memory: Memory, circle: Circle, by: AbstractBaseUser) -> None:
    if memory.owner_id != by.pk:
        raise PermissionDenied("Only the memory's owner can share or unshare it.")
    if not CircleMembership.objects.filter(circle=circle, user=by).exists():
        raise PermissionDenied("You can only share into circles you belong to.")


@transaction.atomic
def memory_share(*, memory: Memory, circle: Circle, by: AbstractBaseUser) -> MemoryShare:
    """Share a memory into a circle, or ShareRefused naming who has not consented (nothing written)."""
    _require_sharer(memory, circle, by)
    # Lock the memory's people so a consent change cannot slip between check and write.
    people = Person.objects.filter(
        Q(pk__in=memory.participants.values("person_id")) | Q(pk=memory.source_person_id)
    )
    list(people.order_by("pk").select_for_update().values_list("pk", flat=True))
    blockers = share_blockers(memory=memory, circle=circle)
    if blockers:
        raise ShareRefused(circle, blockers)
    try:
        with transaction.atomic():
            share, _ = MemoryShare.objects.get_or_create(
                memory=memory, circle=circle, defaults={"shared_by": by}
            )
    except IntegrityError:  # a concurrent share of the same pair won
        share = MemoryShare.objects.get(memory=memory, circle=circle)
    return share


@transaction.atomic
def memory_unshare(*, memory: Memory, circle: Circle, by: AbstractBaseUser) -> None:
    if memory.owner_id != by.pk:
        raise PermissionDenied("Only the memory's owner can share or unshare it.")
    MemoryShare.objects.filter(memory=memory, circle=circle).delete()


# --- the access log ------------------------------------------------------------------------


def circle_access_log_record(
    *,
    memories: Iterable[Memory],
    viewer: AbstractBaseUser,
    surface: str = AccessSurface.CIRCLE,
    agent: Agent | None = None,
) -> None:
    """One AccessLog row per memory another person (or their agent) was shown.

    The owner's own reads are not logged: the log answers "who else has seen this".
    """
    handed = [(memory.pk, memory.owner_id) for memory in memories if memory.owner_id != viewer.pk]
    access_log_insert(handed, surface=surface, agent=agent, viewer=viewer)


# --- writing from a circle's page -----------------------------------------------------------


@dataclass(frozen=True)
class CircleMemory:
    memory: Memory
    refused: ShareRefused | None  # set when the memory was saved but stayed private


def circle_memory_create(
    *,
    circle: Circle,
    owner: AbstractBaseUser,
    body: str,
    title: str = "",
    sensitivity: str | None = None,
    people: Iterable[Person] = (),
) -> CircleMemory:
    """Write a memory into the owner's journal and share it into the circle (context inheritance).

    The memory is saved first and stays in the journal whatever happens next: if
    someone in it has not consented to the circle, the share is refused (nothing
    shared) and the refusal, naming them, is returned rather than raised.
    """
    if not CircleMembership.objects.filter(circle=circle, user=owner).exists():
        raise PermissionDenied("You can only write into circles you belong to.")
    memory = memory_create(
        owner=owner,
        body=body,
        title=title,
        sensitivity=sensitivity,
        participants=[ParticipantSpec(person=person) for person in people],
    )
    try:
        memory_share(memory=memory, circle=circle, by=owner)
    except ShareRefused as refused:
        return CircleMemory(memory=memory, refused=refused)
    return CircleMemory(memory=memory, refused=None)
