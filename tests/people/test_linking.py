"""Linked people decide their own consent (SPEC §4 "Linked people")."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from circles.selectors import linked_consents_for_user
from inbox.models import Notification
from memories.retrieval import agent_visible_memories
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentActor, ConsentEvent, ConsentStatus, Person
from people.services import (
    LinkInvalid,
    linked_user_consents_revoke_all,
    person_create,
    person_link_accept,
    person_link_invite_create,
    person_link_invite_revoke,
    person_set_consent,
    person_unlink,
)
from portability.services import account_delete

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob(db):
    from accounts.services import user_signup

    return user_signup(username="bob", password="correct horse battery")


@pytest.fixture
def linked_bob(alice, bob) -> Person:
    """Bob in Alice's journal, linked to Bob's account."""
    person = person_create(owner=alice, display_name="Bob", aliases=["Bobby"])
    _, token = person_link_invite_create(person=person, by=alice)
    return person_link_accept(token=token, user=bob)


def test_accepting_a_link_invitation_links_and_tells_the_owner(alice, bob):
    person = person_create(owner=alice, display_name="Bob")
    invite, token = person_link_invite_create(person=person, by=alice)
    assert invite.token_hash != token
    person_link_accept(token=token, user=bob)
    person.refresh_from_db()
    assert person.linked_user == bob
    assert Notification.objects.filter(recipient=alice, kind="link_accepted").count() == 1


def test_every_token_failure_is_clear_and_changes_nothing(alice, bob, mallory):
    person = person_create(owner=alice, display_name="Bob")
    expired_invite, expired = person_link_invite_create(person=person, by=alice)
    expired_invite.expires_at = timezone.now() - timedelta(seconds=1)
    expired_invite.save()
    revoked_invite, revoked = person_link_invite_create(person=person, by=alice)
    person_link_invite_revoke(invite=revoked_invite, by=alice)
    _, own = person_link_invite_create(person=person, by=alice)
    cases = [(expired, bob, "expired"), (revoked, bob, "withdrawn"), ("nonsense", bob, "not valid")]
    cases.append((own, alice, "your own journal"))
    for token, user, words in cases:
        with pytest.raises(LinkInvalid, match=words):
            person_link_accept(token=token, user=user)
    person.refresh_from_db()
    assert person.linked_user is None
    _, used = person_link_invite_create(person=person, by=alice)
    _, second = person_link_invite_create(person=person, by=alice)
    person_link_accept(token=used, user=bob)
    with pytest.raises(LinkInvalid, match="already been used"):
        person_link_accept(token=used, user=mallory)
    with pytest.raises(LinkInvalid, match="already linked"):
        person_link_accept(token=second, user=mallory)
    person.refresh_from_db()
    assert person.linked_user == bob


def test_the_owner_cannot_grant_for_a_linked_person_but_can_revoke(alice, linked_bob):
    with pytest.raises(PermissionDenied, match="decides their own consent"):
        person_set_consent(person=linked_bob, status=ConsentStatus.GRANTED, actor=alice)
    linked_bob.refresh_from_db()
    assert linked_bob.consent_status == ConsentStatus.PENDING
    assert person_set_consent(person=linked_bob, status=ConsentStatus.REVOKED, actor=alice) is not None


def test_the_linked_person_decides_and_the_gate_follows_on_the_next_query(alice, bob, linked_bob):
    memory = memory_create(
        owner=alice, body="Bob's birthday", participants=[ParticipantSpec(person=linked_bob)]
    )
    assert not agent_visible_memories(alice).filter(pk=memory.pk).exists()
    event = person_set_consent(
        person=linked_bob,
        status=ConsentStatus.GRANTED,
        actor=bob,
        actor_kind=ConsentActor.SELF,
        reason="fine",
    )
    assert event.actor_kind == ConsentActor.SELF
    assert agent_visible_memories(alice).filter(pk=memory.pk).exists()
    assert Notification.objects.filter(recipient=alice, kind="consent_changed").exists()
    person_set_consent(
        person=linked_bob, status=ConsentStatus.REVOKED, actor=bob, actor_kind=ConsentActor.SELF
    )
    assert not agent_visible_memories(alice).filter(pk=memory.pk).exists()


def test_nobody_else_can_decide_as_the_person(alice, mallory, linked_bob):
    for actor in (alice, mallory):
        with pytest.raises(PermissionDenied):
            person_set_consent(
                person=linked_bob, status=ConsentStatus.GRANTED, actor=actor, actor_kind=ConsentActor.SELF
            )


def test_unlinking_keeps_the_last_choices_and_gives_control_back(alice, bob, linked_bob):
    person_set_consent(
        person=linked_bob, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF
    )
    person_unlink(person=linked_bob, by=bob)
    linked_bob.refresh_from_db()
    assert linked_bob.linked_user is None and linked_bob.consent_status == ConsentStatus.GRANTED
    person_set_consent(person=linked_bob, status=ConsentStatus.PENDING, actor=alice)
    person_set_consent(person=linked_bob, status=ConsentStatus.GRANTED, actor=alice)  # allowed again


def test_my_consents_lists_journals_with_counts_only(alice, bob, linked_bob):
    memory_create(owner=alice, body="a secret about Bob", participants=[ParticipantSpec(person=linked_bob)])
    [journal] = linked_consents_for_user(user=bob)
    assert journal.owner == alice
    [entry] = journal.people
    agents = entry.audiences[0]
    assert (agents.consent.audience, agents.consent.status, agents.memory_count) == ("agents", "pending", 1)


def test_revoke_everything_for_a_journal_and_account_deletion_fail_closed(alice, bob, linked_bob):
    person_set_consent(
        person=linked_bob, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF
    )
    assert linked_user_consents_revoke_all(user=bob, reason="in a hurry", owner_id=alice.pk) == 1
    linked_bob.refresh_from_db()
    assert linked_bob.consent_status == ConsentStatus.REVOKED
    person_set_consent(
        person=linked_bob, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF
    )
    account_delete(user=bob, password="correct horse battery")
    linked_bob.refresh_from_db()
    assert linked_bob.linked_user is None and linked_bob.consent_status == ConsentStatus.REVOKED
    last = ConsentEvent.objects.filter(person=linked_bob).order_by("-created_at", "-id").first()
    assert "account was deleted" in last.reason and last.actor is None


def test_a_stale_copy_of_the_person_does_not_let_the_owner_grant(alice, bob):
    person = person_create(owner=alice, display_name="Bob")
    stale = Person.objects.get(pk=person.pk)  # loaded before Bob links
    _, token = person_link_invite_create(person=person, by=alice)
    person_link_accept(token=token, user=bob)
    with pytest.raises(PermissionDenied):
        person_set_consent(person=stale, status=ConsentStatus.GRANTED, actor=alice)
    person.refresh_from_db()
    assert person.consent_status == ConsentStatus.PENDING
