"""Every kind of link token that must be refused, for the service, API and page tests.

SPEC §4: a person has at most one live invitation (a new one, linking, unlinking and
account deletion withdraw the others), and a refused token names nobody. Alice owns
the journal; each case says who tries the token. The people and accounts are named so
that a response naming any of them is caught: see NAMES.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from accounts.services import user_signup
from linked.services import (
    person_link_accept,
    person_link_invite_create,
    person_link_invite_revoke,
    person_unlink,
)
from people.models import ConsentActor, ConsentStatus, Person, PersonLinkInvite
from people.services import person_create, person_set_consent
from portability.services import account_delete

# Everyone a refused token could name: the people in Alice's journal and the accounts involved.
NAMES = ("Bob", "Carol", "Dan", "Eve", "Finn", "Gus", "Hana", "alice", "bob", "finn", "mallory")


@dataclass(frozen=True)
class RefusedToken:
    token: str
    user: AbstractBaseUser  # who tries it


def leftover_invite(person: Person, *, by: AbstractBaseUser) -> str:
    """An open invitation written straight into the table, as one made before linking withdrew
    the others (or racing an accept) could be: the services must not rely on there being none."""
    token = secrets.token_urlsafe(32)
    PersonLinkInvite.objects.create(
        person=person,
        token_hash=hashlib.sha256(token.encode()).hexdigest(),
        created_by=by,
        expires_at=timezone.now() + timedelta(days=14),
    )
    return token


def refused_link_tokens(*, alice, bob, mallory) -> dict[str, RefusedToken]:
    """One token per reason to refuse it; Bob ends linked to "Eve", Finn's account is deleted."""
    person = {name: person_create(owner=alice, display_name=name) for name in NAMES if name[0].isupper()}
    expired_invite, expired = person_link_invite_create(person=person["Bob"], by=alice)
    PersonLinkInvite.objects.filter(pk=expired_invite.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    withdrawn_invite, withdrawn = person_link_invite_create(person=person["Carol"], by=alice)
    person_link_invite_revoke(invite=withdrawn_invite, by=alice)
    _, replaced = person_link_invite_create(person=person["Dan"], by=alice)
    _, own = person_link_invite_create(person=person["Dan"], by=alice)  # replaces the one before

    # Eve links (Bob's account): the invitation used, and a second one made before she linked.
    _, used = person_link_invite_create(person=person["Eve"], by=alice)
    after_linking = leftover_invite(person["Eve"], by=alice)
    person_link_accept(token=used, user=bob)

    # Gus linked, then unlinked, with an invitation still open from before.
    _, gus_link = person_link_invite_create(person=person["Gus"], by=alice)
    person_link_accept(token=gus_link, user=mallory)
    after_unlinking = leftover_invite(person["Gus"], by=alice)
    person_unlink(person=person["Gus"], by=mallory)

    # Finn links, grants, and deletes his account; an invitation was still open from before.
    finn = user_signup(username="finn", password="correct horse battery")
    _, finn_link = person_link_invite_create(person=person["Finn"], by=alice)
    person_link_accept(token=finn_link, user=finn)
    person_set_consent(
        person=person["Finn"], status=ConsentStatus.GRANTED, actor=finn, actor_kind=ConsentActor.SELF
    )
    after_deletion = leftover_invite(person["Finn"], by=alice)
    account_delete(user=finn, password="correct horse battery")

    # Hana: an invitation left open while someone else linked her.
    leftover_linked = leftover_invite(person["Hana"], by=alice)
    Person.objects.filter(pk=person["Hana"].pk).update(linked_user=bob)

    return {
        "unknown": RefusedToken("not-a-real-token", mallory),
        "expired": RefusedToken(expired, mallory),
        "withdrawn": RefusedToken(withdrawn, mallory),
        "replaced by a newer one": RefusedToken(replaced, mallory),
        "used": RefusedToken(used, mallory),
        "second, after linking": RefusedToken(after_linking, mallory),
        "second, after unlinking": RefusedToken(after_unlinking, mallory),
        "second, after account deletion": RefusedToken(after_deletion, mallory),
        "person linked meanwhile": RefusedToken(leftover_linked, mallory),
        "own journal": RefusedToken(own, alice),
    }


def invites_state() -> list:
    return list(PersonLinkInvite.objects.order_by("pk").values_list("pk", "used_at", "used_by", "revoked_at"))


def links_state() -> dict:
    return dict(Person.objects.filter(is_self=False).values_list("display_name", "linked_user"))
