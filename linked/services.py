"""Linked people (SPEC §4): a person in someone's journal linked to their own account.

Writes only. The owner invites (one live invitation per person, token stored hashed,
14 days); the person accepts while signed in; either side unlinks; the person decides
their own consent (people.services.person_set_consent with actor_kind=SELF) and answers
the agents' consent requests about them. Every refused token is one answer naming nobody.

Builds on people, memories, circles and agents; none of them imports this module.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.models import ConsentRequest, ConsentRequestStatus
from agents.services import consent_request_close
from people.models import (
    AGENTS_AUDIENCE,
    ConsentActor,
    ConsentStatus,
    ConsentSurface,
    Person,
    PersonConsent,
    PersonLinkInvite,
)
from people.services import person_is_linked, person_set_consent

LINK_INVITE_DAYS = 14


# Every refused token gets these words (SPEC §4: a refused token names nobody). Whether a
# token was used, withdrawn, replaced, expired, never existed, or is for someone already
# linked would tell whoever holds it something about another person's journal.
LINK_REFUSED = (
    "This link invitation can't be used: it may have been used, withdrawn or replaced by a newer "
    "one, it may have expired, or it is not for this account. Ask the person who sent it for a new link."
)


class LinkInvalid(ValidationError):
    """A link token that cannot be used, raised with LINK_REFUSED whatever the reason."""


def _link_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _link_invites_withdraw(*, people: QuerySet[Person] | list[Person]) -> int:
    """Withdraw every unused invitation of these people (the expired ones too: none may ever work)."""
    return PersonLinkInvite.objects.filter(person__in=people, used_at=None, revoked_at=None).update(
        revoked_at=timezone.now()
    )


@transaction.atomic
def person_link_invite_create(*, person: Person, by: AbstractBaseUser) -> tuple[PersonLinkInvite, str]:
    """A single-use invitation (token shown once, stored hashed) for the person to link their account.

    It replaces the person's open invitation, if any: a person has at most one that works,
    so an old link forwarded somewhere can never be the one that links (SPEC §4).
    """
    if person.owner_id != by.pk:
        raise PermissionDenied("Only the journal's owner can invite a person to link.")
    if person.is_self:
        raise ValidationError("Self is you: it is already linked to your account.")
    # The person row is locked first, as accepting and unlinking lock it: an invitation made
    # while another is being accepted either sees the person linked or is withdrawn by the link.
    locked = Person.objects.select_for_update().get(pk=person.pk)
    if person_is_linked(locked):
        raise ValidationError(f"{locked.display_name} is already linked to an account.")
    _link_invites_withdraw(people=[locked])
    token = secrets.token_urlsafe(32)
    invite = PersonLinkInvite.objects.create(
        person=locked,
        token_hash=_link_token_hash(token),
        created_by=by,
        expires_at=timezone.now() + timedelta(days=LINK_INVITE_DAYS),
    )
    return invite, token


def person_link_invite_revoke(*, invite: PersonLinkInvite, by: AbstractBaseUser) -> PersonLinkInvite:
    if invite.person.owner_id != by.pk:
        raise PermissionDenied("Only the journal's owner can withdraw this invitation.")
    if invite.revoked_at is None and invite.used_at is None:
        invite.revoked_at = timezone.now()
        invite.save(update_fields=["revoked_at"])
    return invite


def person_link_invite_check(*, token: str) -> PersonLinkInvite:
    """The open invitation behind `token`, or LinkInvalid (the same for every reason).

    An invitation for a person already linked is refused too, whoever asks: it can only be
    one left over from before linking withdrew the others.
    """
    invite = (
        PersonLinkInvite.objects.select_related("person", "person__owner")
        .filter(token_hash=_link_token_hash((token or "").strip()))
        .first()
    )
    if invite is None or not invite.is_open or invite.person.linked_user_id is not None:
        raise LinkInvalid(LINK_REFUSED)
    return invite


def _check_linkable(*, person: Person, user: AbstractBaseUser) -> None:
    # Their own person, or someone already linked: refused with the same words as a bad token.
    if person.owner_id == user.pk or person.linked_user_id is not None:
        raise LinkInvalid(LINK_REFUSED)


def person_link_invite_check_for_user(*, token: str, user: AbstractBaseUser) -> PersonLinkInvite:
    """What person_link_accept would refuse, asked before accepting (the link page), without writing."""
    invite = person_link_invite_check(token=token)
    _check_linkable(person=invite.person, user=user)
    return invite


@transaction.atomic
def person_link_accept(*, token: str, user: AbstractBaseUser) -> Person:
    """Link the invitation's person to `user`: from now on they decide their own consent.

    Every other invitation for the person is withdrawn: once linked, no old link may
    let someone else in later (after an unlink, or after this account is deleted).
    """
    found = person_link_invite_check(token=token)
    # Person, then invitation: the order person_link_invite_create and person_unlink lock in.
    # The invitation is checked again under the lock: it may have been used, withdrawn or
    # replaced since it was read.
    person = Person.objects.select_for_update().get(pk=found.person_id)
    invite = PersonLinkInvite.objects.select_for_update().get(pk=found.pk)
    if not invite.is_open:
        raise LinkInvalid(LINK_REFUSED)
    _check_linkable(person=person, user=user)
    now = timezone.now()
    Person.objects.filter(pk=person.pk).update(linked_user=user)
    invite.used_at, invite.used_by = now, user
    invite.save(update_fields=["used_at", "used_by"])
    _link_invites_withdraw(people=[person])
    _others_decisions_become_the_owners(person=person, user=user)
    person.linked_user = user
    from inbox.models import NotificationKind
    from inbox.services import notify

    notify(
        recipient=person.owner_id,
        kind=NotificationKind.LINK_ACCEPTED,
        text=f"{person.display_name} accepted your link invitation: they now decide their own consent.",
        url=f"/people/{person.pk}/",
    )
    return person


def _others_decisions_become_the_owners(*, person: Person, user: AbstractBaseUser) -> None:
    """Choices an earlier linked account made for this person are not `user`'s: they stay in
    force, credited to the journal's owner (who was in charge since that unlink), so nobody
    is shown "by you" for a decision someone else made. The history keeps who made them."""
    from people.models import ConsentActor, ConsentEvent, PersonConsent

    for consent in PersonConsent.objects.filter(person=person, updated_by=ConsentActor.SELF):
        last_own = (
            ConsentEvent.objects.filter(
                person=person, audience=consent.audience, actor_kind=ConsentActor.SELF
            )
            .order_by("-created_at", "-pk")
            .values_list("actor_id", flat=True)
            .first()
        )
        if last_own != user.pk:
            PersonConsent.objects.filter(pk=consent.pk).update(updated_by=ConsentActor.OWNER)


@transaction.atomic
def person_unlink(*, person: Person, by: AbstractBaseUser) -> Person:
    """Either side unlinks. The person's last choices stay; the owner decides again from now on.

    Any invitation still open for the person is withdrawn: linking again takes a new one.
    """
    locked = Person.objects.select_for_update().get(pk=person.pk)
    if not person_is_linked(locked) or by.pk not in (locked.owner_id, locked.linked_user_id):
        raise PermissionDenied("Only the journal's owner or the linked person can unlink.")
    other = locked.owner_id if by.pk == locked.linked_user_id else locked.linked_user_id
    Person.objects.filter(pk=person.pk).update(linked_user=None)
    _link_invites_withdraw(people=[locked])
    person.linked_user = None
    from inbox.models import NotificationKind
    from inbox.services import notify

    notify(
        recipient=other,
        kind=NotificationKind.UNLINKED,
        text=f"The link for {locked.display_name} was removed; their last consent choices stay.",
        url=f"/people/{person.pk}/" if other == locked.owner_id else "/me/consents/",
    )
    return person


def linked_user_link_invites_withdraw(*, user: AbstractBaseUser) -> int:
    """Withdraw every invitation for every person linked to `user` (their account is being deleted).

    Called before the link itself goes: afterwards nothing would say which people were
    this account's, and an old invitation would let another account speak for them.
    """
    return _link_invites_withdraw(
        people=Person.objects.filter(linked_user=user, is_self=False).exclude(owner=user)
    )


@transaction.atomic
def linked_user_consents_revoke_all(
    *, user: AbstractBaseUser, reason: str, owner_id: int | None = None
) -> int:
    """Revoke every audience of every person linked to `user` (of one journal, or all), as the person.

    Used by "revoke everything for this journal" and when the linked account is
    deleted (fail closed: nobody can speak for them any more).
    """
    people = Person.objects.filter(linked_user=user, is_self=False).exclude(owner=user)
    if owner_id is not None:
        people = people.filter(owner_id=owner_id)
    changed = 0
    for person in people.order_by("pk"):
        audiences = {AGENTS_AUDIENCE} | set(
            PersonConsent.objects.filter(person=person).values_list("audience", flat=True)
        )
        for audience in sorted(audiences):
            if person_set_consent(
                person=person,
                status=ConsentStatus.REVOKED,
                actor=user,
                reason=reason,
                audience=audience,
                actor_kind=ConsentActor.SELF,
            ):
                changed += 1
    return changed


# --- consent requests from the owner's agents, answered by the person they are about ----------


@transaction.atomic
def consent_request_answer_by_person(
    *,
    consent_request: ConsentRequest,
    user: AbstractBaseUser,
    grant: bool,
    reason: str = "",
    surface: str = ConsentSurface.UI,
) -> ConsentRequest:
    """The linked person answers an agent's request about them: grant their consent for the owner's agents
    (recorded as decided by the person themself) and close the request, or dismiss it.
    """
    person = consent_request.person
    if not person_is_linked(person) or person.linked_user_id != user.pk:
        raise PermissionDenied(
            "Only the person it is about, signed in to their linked account, can answer this request."
        )
    status = ConsentRequestStatus.APPROVED if grant else ConsentRequestStatus.DISMISSED
    consent_request_close(consent_request=consent_request, status=status)
    if grant:
        who = consent_request.agent.name if consent_request.agent is not None else "an agent"
        person_set_consent(
            person=person,
            status=ConsentStatus.GRANTED,
            actor=user,
            surface=surface,
            reason=reason.strip() or f"Granted after a request from {who}.",
            actor_kind=ConsentActor.SELF,
        )
    return consent_request
