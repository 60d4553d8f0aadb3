"""The people concerned are told: a linked person whose consent the owner overrides, a member let in,
turned down, removed, or whose circle is deleted — once each, to them alone, naming only what they knew.

Alice owns the circle "Family" and a journal where Bob is linked (as "Bobby"); Dora asks to join;
Mallory has nothing to do with any of it.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from circles.models import CircleMembership, JoinRequest, MembershipRole
from circles.services import (
    circle_create,
    circle_delete,
    invite_accept,
    invite_create,
    join_request_approve,
    join_request_decline,
    membership_remove,
    memory_share,
)
from inbox.models import Notification, NotificationKind
from memories.services import memory_create
from people.models import ConsentActor, ConsentStatus, Person
from people.services import person_create, person_set_consent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
SECRET = "the lighthouse keeper's letter"


@pytest.fixture
def bob(db):
    from accounts.services import user_signup

    return user_signup(username="bob", password="correct horse battery")


@pytest.fixture
def family(alice, bob):
    circle = circle_create(owner=alice, name="Family", description="Grandma's stories")
    CircleMembership.objects.create(circle=circle, user=bob, role=MembershipRole.MEMBER)
    memory = memory_create(owner=alice, body=f"Reading {SECRET} together.", sensitivity="public")
    memory_share(memory=memory, circle=circle, by=alice)
    return circle


@pytest.fixture
def dora_asks(alice, family):
    dora = UserFactory(username="dora")
    invite_accept(token=invite_create(circle=family, by=alice).token, user=dora)
    return dora, JoinRequest.objects.get(circle=family, user=dora)


@pytest.fixture
def bobby(alice, bob, family):
    """Alice's person "Bobby", linked to Bob, who granted both audiences himself."""
    person = person_create(owner=alice, display_name="Bobby")
    Person.objects.filter(pk=person.pk).update(linked_user=bob)
    person.refresh_from_db()
    for audience in ("agents", family.audience):
        person_set_consent(
            person=person,
            status=ConsentStatus.GRANTED,
            actor=bob,
            actor_kind=ConsentActor.SELF,
            audience=audience,
        )
    return person


def told(user, kind: str) -> list[Notification]:
    return list(Notification.objects.filter(recipient=user, kind=kind))


def assert_nobody_else_told(kind: str, *recipients) -> None:
    assert set(Notification.objects.filter(kind=kind).values_list("recipient_id", flat=True)) == {
        user.pk for user in recipients
    }


def assert_leaks_nothing() -> None:
    for notification in Notification.objects.all():
        assert SECRET not in notification.text and "lighthouse" not in notification.text


# --- circles ----------------------------------------------------------------------------


def test_approved_requester_is_told_once(alice, family, dora_asks, mallory):
    dora, join_request = dora_asks
    join_request_approve(request=join_request, by=alice)
    with pytest.raises(ValidationError):
        join_request_approve(request=join_request, by=alice)
    [notification] = told(dora, NotificationKind.JOIN_APPROVED)
    assert notification.text == "alice approved your request: you are now a member of Family."
    assert notification.url == reverse("circle_detail", args=[family.pk])
    assert_nobody_else_told(NotificationKind.JOIN_APPROVED, dora)
    assert_leaks_nothing()


def test_declined_requester_is_told_once_with_no_link_in(alice, family, dora_asks):
    dora, join_request = dora_asks
    join_request_decline(request=join_request, by=alice)
    with pytest.raises(ValidationError):
        join_request_decline(request=join_request, by=alice)
    [notification] = told(dora, NotificationKind.JOIN_DECLINED)
    assert notification.text == "alice declined your request to join Family."
    assert notification.url == ""  # not a member: nothing of the circle to open
    assert_nobody_else_told(NotificationKind.JOIN_DECLINED, dora)
    assert_leaks_nothing()


def test_removed_member_is_told_once_but_one_who_leaves_is_not(alice, bob, family):
    carol = UserFactory(username="carol")
    CircleMembership.objects.create(circle=family, user=carol, role=MembershipRole.MEMBER)
    membership_remove(circle=family, user_id=bob.pk, by=alice)
    with pytest.raises(ValidationError):
        membership_remove(circle=family, user_id=bob.pk, by=alice)
    membership_remove(circle=family, user_id=carol.pk, by=carol)
    [notification] = told(bob, NotificationKind.CIRCLE_REMOVED)
    assert notification.text.startswith("alice removed you from Family.")
    assert_nobody_else_told(NotificationKind.CIRCLE_REMOVED, bob)
    assert_leaks_nothing()


def test_a_member_cannot_remove_another_and_nobody_is_told(alice, bob, family):
    carol = UserFactory(username="carol")
    CircleMembership.objects.create(circle=family, user=carol, role=MembershipRole.MEMBER)
    with pytest.raises(PermissionDenied):
        membership_remove(circle=family, user_id=carol.pk, by=bob)
    assert not Notification.objects.filter(kind=NotificationKind.CIRCLE_REMOVED).exists()


def test_deleted_circle_tells_each_member_and_waiting_requester_once(alice, bob, family, dora_asks, mallory):
    dora, _ = dora_asks
    circle_delete(circle=family, by=alice)
    [to_bob] = told(bob, NotificationKind.CIRCLE_DELETED)
    assert to_bob.text.startswith("alice deleted the circle Family.")
    assert to_bob.url == ""  # the circle is gone
    [to_dora] = told(dora, NotificationKind.CIRCLE_DELETED)
    assert to_dora.text == "alice deleted the circle Family: your request to join it is closed."
    assert_nobody_else_told(NotificationKind.CIRCLE_DELETED, bob, dora)
    assert_leaks_nothing()


def test_a_member_cannot_delete_the_circle_and_nobody_is_told(bob, family):
    with pytest.raises(PermissionDenied):
        circle_delete(circle=family, by=bob)
    assert not Notification.objects.filter(kind=NotificationKind.CIRCLE_DELETED).exists()


# --- a linked person's consent overridden by the owner -----------------------------------


def test_linked_person_is_told_when_the_owner_revokes_or_resets_their_consent(alice, bob, family, bobby):
    person_set_consent(person=bobby, status=ConsentStatus.REVOKED, actor=alice)
    person_set_consent(person=bobby, status=ConsentStatus.REVOKED, actor=alice)  # unchanged: nothing new
    person_set_consent(person=bobby, status=ConsentStatus.PENDING, actor=alice, audience=family.audience)
    texts = [n.text for n in reversed(told(bob, NotificationKind.CONSENT_OVERRIDDEN))]
    assert texts == [
        "alice changed your consent for alice's agents from granted to revoked "
        "(you are “Bobby” in alice's journal).",
        "alice changed your consent for the circle Family from granted to pending "
        "(you are “Bobby” in alice's journal).",
    ]
    assert {n.url for n in told(bob, NotificationKind.CONSENT_OVERRIDDEN)} == {reverse("my_consents")}
    assert_nobody_else_told(NotificationKind.CONSENT_OVERRIDDEN, bob)
    assert_leaks_nothing()


def test_unlinked_people_and_the_persons_own_choices_tell_no_linked_person(alice, bob, family, bobby):
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    person_set_consent(person=carol, status=ConsentStatus.REVOKED, actor=alice)
    person_set_consent(
        person=bobby, status=ConsentStatus.REVOKED, actor=bob, actor_kind=ConsentActor.SELF, audience="agents"
    )
    assert not Notification.objects.filter(kind=NotificationKind.CONSENT_OVERRIDDEN).exists()


def test_owner_is_told_the_persons_choice_about_their_own_agents_in_the_right_words(
    alice, bob, family, bobby
):
    # The person's choice is about the owner's agents: "your agents" to the owner, never "their".
    texts = {n.text for n in told(alice, NotificationKind.CONSENT_CHANGED)}
    assert texts == {
        "Bobby set their consent for your agents to granted.",
        "Bobby set their consent for the circle Family to granted.",
    }


# --- the inbox page ---------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_each_notification_shows_in_its_recipients_inbox_only(
    client, alice, bob, family, bobby, dora_asks, mallory, htmx
):
    dora, join_request = dora_asks
    join_request_decline(request=join_request, by=alice)
    person_set_consent(person=bobby, status=ConsentStatus.REVOKED, actor=alice)
    membership_remove(circle=family, user_id=bob.pk, by=alice)
    headers = HX if htmx else {}

    client.force_login(bob)
    page = client.get(reverse("inbox"), **headers).content.decode()
    assert "alice changed your consent for alice&#x27;s agents from granted to revoked" in page
    assert f'href="{reverse("my_consents")}"' in page
    assert "alice removed you from Family." in page
    assert "Consent changed by the journal&#x27;s owner" in page and "Removed from a circle" in page
    assert "declined your request" not in page

    client.force_login(dora)
    page = client.get(reverse("inbox"), **headers).content.decode()
    assert "alice declined your request to join Family." in page and "Join request declined" in page
    assert "removed you" not in page and "Bobby" not in page

    client.force_login(mallory)
    page = client.get(reverse("inbox"), **headers).content.decode()
    assert "Family" not in page and "alice" not in page
    assert SECRET not in page
