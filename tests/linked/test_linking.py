"""Linked people decide their own consent (SPEC §4 "Linked people")."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from inbox.models import Notification
from linked.selectors import linked_consents_for_user, person_link_invites_open
from linked.services import (
    LINK_REFUSED,
    LinkInvalid,
    linked_user_consents_revoke_all,
    person_link_accept,
    person_link_invite_create,
    person_unlink,
)
from memories.gate import agent_visible_memories
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentActor, ConsentEvent, ConsentStatus, Person, PersonConsent
from people.services import person_create, person_set_consent
from portability.services import account_delete
from tests.linked.refused_links import (
    NAMES,
    invites_state,
    leftover_invite,
    links_state,
    refused_link_tokens,
)

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


def test_every_refused_token_gets_the_same_words_naming_nobody_and_changes_nothing(alice, bob, mallory):
    """Unknown, expired, withdrawn, replaced, used, linked meanwhile or one's own: one refusal (SPEC §4)."""
    cases = refused_link_tokens(alice=alice, bob=bob, mallory=mallory)
    invites, links = invites_state(), links_state()
    for case, refused in cases.items():
        with pytest.raises(LinkInvalid) as error:
            person_link_accept(token=refused.token, user=refused.user)
        assert error.value.messages == [LINK_REFUSED], case
    assert not [name for name in NAMES if name in LINK_REFUSED]
    assert (invites_state(), links_state()) == (invites, links)


# --- at most one live invitation per person (SPEC §4: nobody else can ever speak as Bob) ---------


def refused_like_an_unknown_token(token: str, user) -> None:
    with pytest.raises(LinkInvalid) as unknown:
        person_link_accept(token="never-made", user=user)
    with pytest.raises(LinkInvalid) as refused:
        person_link_accept(token=token, user=user)
    assert refused.value.messages == unknown.value.messages


def test_a_new_invitation_replaces_the_open_one(alice, bob):
    person = person_create(owner=alice, display_name="Bob")
    first, first_token = person_link_invite_create(person=person, by=alice)
    second, second_token = person_link_invite_create(person=person, by=alice)
    first.refresh_from_db()
    assert first.revoked_at is not None
    assert list(person_link_invites_open(person=person)) == [second]
    refused_like_an_unknown_token(first_token, bob)
    assert person_link_accept(token=second_token, user=bob).linked_user == bob


def test_linking_withdraws_the_other_invitations_so_none_works_after_unlinking(alice, bob, mallory):
    person = person_create(owner=alice, display_name="Bob")
    _, token = person_link_invite_create(person=person, by=alice)
    second = leftover_invite(person, by=alice)  # made before Bob linked
    person_link_accept(token=token, user=bob)
    assert not person_link_invites_open(person=person).exists()
    refused_like_an_unknown_token(second, mallory)
    person_unlink(person=person, by=bob)
    refused_like_an_unknown_token(second, mallory)
    person.refresh_from_db()
    assert person.linked_user is None


def test_unlinking_withdraws_every_open_invitation(alice, bob, mallory, linked_bob):
    leftover = leftover_invite(linked_bob, by=alice)
    person_unlink(person=linked_bob, by=alice)
    assert not person_link_invites_open(person=linked_bob).exists()
    refused_like_an_unknown_token(leftover, mallory)


def test_after_account_deletion_no_old_invitation_lets_another_account_speak_for_them(alice, mallory):
    """The issue's Finn: after he deleted his account, another account accepted an old
    invitation, granted, and Alice's agents saw the memories about Finn again."""
    from accounts.services import user_signup

    finn = user_signup(username="finn", password="correct horse battery")
    person = person_create(owner=alice, display_name="Finn")
    memory = memory_create(
        owner=alice, body="Finn's birthday picnic", participants=[ParticipantSpec(person=person)]
    )
    _, token = person_link_invite_create(person=person, by=alice)
    old = leftover_invite(person, by=alice)  # open from before linking withdrew the others
    person_link_accept(token=token, user=finn)
    also_old = leftover_invite(person, by=alice)
    person_set_consent(person=person, status=ConsentStatus.GRANTED, actor=finn, actor_kind=ConsentActor.SELF)
    assert agent_visible_memories(alice).filter(pk=memory.pk).exists()
    account_delete(user=finn, password="correct horse battery")
    for token in (old, also_old):
        refused_like_an_unknown_token(token, mallory)
    person.refresh_from_db()
    assert person.linked_user is None and person.consent_status == ConsentStatus.REVOKED
    assert not person_link_invites_open(person=person).exists()
    assert not agent_visible_memories(alice).filter(pk=memory.pk).exists()


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


def test_another_account_linking_later_is_never_shown_an_earlier_persons_choice_as_its_own(
    alice, bob, mallory, linked_bob
):
    person_set_consent(
        person=linked_bob,
        status=ConsentStatus.GRANTED,
        actor=bob,
        actor_kind=ConsentActor.SELF,
        reason="fine by me",
    )
    person_unlink(person=linked_bob, by=bob)
    _, token = person_link_invite_create(person=linked_bob, by=alice)
    person_link_accept(token=token, user=mallory)
    consent = PersonConsent.objects.get(person=linked_bob, audience="agents")
    # Bob's choice stays in force, now as the owner's, and the history still says Bob made it.
    assert consent.status == ConsentStatus.GRANTED and consent.updated_by == ConsentActor.OWNER
    assert ConsentEvent.objects.filter(person=linked_bob, actor=bob, actor_kind=ConsentActor.SELF).exists()

    # Bob linking again later keeps what is his: his own choice is "by you" for him.
    person_unlink(person=linked_bob, by=alice)
    person_set_consent(person=linked_bob, status=ConsentStatus.REVOKED, actor=alice)
    _, token = person_link_invite_create(person=linked_bob, by=alice)
    person_link_accept(token=token, user=bob)
    person_set_consent(
        person=linked_bob, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF
    )
    person_unlink(person=linked_bob, by=bob)
    _, token = person_link_invite_create(person=linked_bob, by=alice)
    person_link_accept(token=token, user=bob)
    consent.refresh_from_db()
    assert consent.updated_by == ConsentActor.SELF
