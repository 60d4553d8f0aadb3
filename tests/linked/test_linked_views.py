"""The pages of "people decide for themselves" (SPEC §4 "Linked people", §6).

Alice owns the journal and the circle Family; Bob has an account and is the person
"Bob" in Alice's journal; Mallory has no access. Each htmx view is asked plain and
with HX-Request.
"""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from agents.models import Agent, ConsentRequest, ConsentRequestStatus
from agents.services import consent_request_create
from circles.services import circle_create, invite_accept, invite_create, memory_share
from inbox.models import Notification, NotificationKind
from linked.services import LINK_REFUSED, person_link_accept, person_link_invite_create
from memories.services import ParticipantSpec, memory_create
from people.models import (
    ConsentActor,
    ConsentEvent,
    ConsentStatus,
    Person,
    PersonConsent,
    PersonLinkInvite,
    circle_audience,
)
from people.services import person_create, person_set_consent
from tests.linked.refused_links import NAMES, invites_state, links_state, refused_link_tokens

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
SECRET_TITLE = "The hospital night"
SECRET_BODY = "Bob cried in the car park after the scan results."


def hx(htmx: bool) -> dict:
    return HX if htmx else {}


def text(response) -> str:
    """The page as a reader sees it (entities unescaped)."""
    return unescape(response.content.decode())


@pytest.fixture
def bob(db):
    from accounts.services import user_signup

    return user_signup(username="bob", password="correct horse battery")


@pytest.fixture
def family(alice):
    return circle_create(owner=alice, name="Family")


@pytest.fixture
def bob_person(alice) -> Person:
    return person_create(owner=alice, display_name="Bob")


@pytest.fixture
def secret(alice, bob_person, family):
    """A private memory about Bob, shared into Family (Bob has not consented, so nobody else sees it).

    Ask for it before `linked`: once Bob has linked, only he can grant.
    """
    memory = memory_create(
        owner=alice,
        title=SECRET_TITLE,
        body=SECRET_BODY,
        participants=[ParticipantSpec(person=bob_person)],
    )
    person_set_consent(person=bob_person, status=ConsentStatus.GRANTED, actor=alice, audience=family.audience)
    memory_share(memory=memory, circle=family, by=alice)
    person_set_consent(person=bob_person, status=ConsentStatus.PENDING, actor=alice, audience=family.audience)
    return memory


@pytest.fixture
def linked(alice, bob, bob_person) -> Person:
    _, token = person_link_invite_create(person=bob_person, by=alice)
    return person_link_accept(token=token, user=bob)


@pytest.fixture
def bob_client(bob) -> Client:
    client = Client()
    client.force_login(bob)
    return client


def link_token_in(html: str) -> str:
    return re.search(r"/links/([A-Za-z0-9_-]+)/", html).group(1)


def consent_panel(html: str) -> str:
    start = html.index('id="consent-panel"')
    return html[start : html.index("<h3>History</h3>", start)]


# --- the owner's person page: invite, withdraw, linked, unlink ------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_invites_and_sees_the_link_once_with_a_copy_button(alice_client, bob_person, htmx):
    page = text(alice_client.get(reverse("person_detail", args=[bob_person.pk])))
    assert "Invite Bob to link their account" in page
    assert "/static/js/copy.js" in page  # the copy button's script is a static file, not inline

    response = alice_client.post(reverse("person_link_invite_create", args=[bob_person.pk]), **hx(htmx))
    assert response.status_code == 200
    assert "no-cache" in response.headers.get("Cache-Control", "") or "max-age=0" in response["Cache-Control"]
    html = text(response)
    assert ("<html" in html) is (not htmx)
    assert 'id="link-panel"' in html
    token = link_token_in(html)
    assert 'data-copy-target="#new-link-url"' in html
    invite = PersonLinkInvite.objects.get(person=bob_person)
    assert invite.token_hash != token and token not in invite.token_hash
    assert invite.expires_at.strftime("%-d %b %Y") in html
    assert "Withdraw" in html

    # Shown once: the page never shows the token again.
    again = text(alice_client.get(reverse("person_detail", args=[bob_person.pk])))
    assert token not in again
    assert "Open invitation" in again and "Withdraw" in again
    assert "a new link replaces the old one" in again and "Make a new link" in again


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_withdraws_an_invitation(alice_client, alice, bob_person, htmx):
    invite, token = person_link_invite_create(person=bob_person, by=alice)
    url = reverse("person_link_invite_revoke", args=[bob_person.pk, invite.pk])
    response = alice_client.post(url, **hx(htmx))
    invite.refresh_from_db()
    assert invite.revoked_at is not None
    if htmx:
        html = text(response)
        assert response.status_code == 200 and "<html" not in html
        assert "withdrawn" in html and "Open invitation" not in html
    else:
        assert response.status_code == 302
    assert Client().get(reverse("person_link", args=[token])).status_code == 404


def test_nobody_else_sees_or_withdraws_an_invitation(mallory_client, alice, bob_person):
    invite, _ = person_link_invite_create(person=bob_person, by=alice)
    assert mallory_client.post(reverse("person_link_invite_create", args=[bob_person.pk])).status_code == 404
    url = reverse("person_link_invite_revoke", args=[bob_person.pk, invite.pk])
    assert mallory_client.post(url).status_code == 404
    invite.refresh_from_db()
    assert invite.revoked_at is None
    assert not PersonLinkInvite.objects.exclude(pk=invite.pk).exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_linked_person_page_says_who_decides_and_offers_no_grant(alice_client, linked, family, htmx):
    response = alice_client.get(reverse("person_detail", args=[linked.pk]))
    html = text(response)
    assert "Linked to <strong>bob</strong> — Bob decides their own consent." in html
    assert reverse("person_unlink", args=[linked.pk]) in html
    assert "Invite Bob to link" not in html
    panel = consent_panel(html)
    assert 'value="granted"' not in panel  # neither My agents nor the Family circle
    assert panel.count('value="revoked"') == 2 and panel.count('value="pending"') == 2
    assert "only they can grant it" in panel
    # The htmx fragment (the consent panel) follows the same rule.
    fragment = text(alice_client.get(reverse("person_detail", args=[linked.pk]), **HX))
    assert "<html" not in fragment and 'value="granted"' not in fragment


@pytest.mark.parametrize("htmx", [False, True])
def test_a_stale_grant_form_shows_the_services_message_not_an_error_page(alice_client, linked, family, htmx):
    response = alice_client.post(
        reverse("person_consent", args=[linked.pk]), {"status": "granted", "reason": "x"}, **hx(htmx)
    )
    assert response.status_code == 200
    html = text(response)
    assert "Bob decides their own consent" in html and "only they can grant it" in html
    response = alice_client.post(
        reverse("person_circle_consent", args=[family.pk, linked.pk]), {"status": "granted"}, **hx(htmx)
    )
    assert response.status_code == 200
    assert "only they can grant it" in text(response)
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.PENDING
    assert not PersonConsent.objects.filter(person=linked, status=ConsentStatus.GRANTED).exists()
    assert not ConsentEvent.objects.filter(person=linked).exists()


def test_the_owner_may_still_revoke_a_linked_person(alice_client, bob, linked):
    person_set_consent(person=linked, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF)
    response = alice_client.post(reverse("person_consent", args=[linked.pk]), {"status": "revoked"})
    assert response.status_code == 302
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.REVOKED


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_unlinks_after_confirming(alice_client, bob, linked, htmx):
    url = reverse("person_unlink", args=[linked.pk])
    confirm = alice_client.get(url, **hx(htmx))
    assert confirm.status_code == 200 and "Unlink Bob?" in text(confirm)
    assert ("<html" in text(confirm)) is (not htmx)
    linked.refresh_from_db()
    assert linked.linked_user == bob  # asking changes nothing
    response = alice_client.post(url, **hx(htmx))
    if htmx:
        assert response.status_code == 200 and response["HX-Redirect"] == reverse(
            "person_detail", args=[linked.pk]
        )
    else:
        assert response.status_code == 302
    linked.refresh_from_db()
    assert linked.linked_user is None
    assert Notification.objects.filter(recipient=bob, kind=NotificationKind.UNLINKED).exists()


# --- the link page ---------------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_link_page_signed_out_sends_to_log_in_or_sign_up_and_back(client, alice, bob_person, htmx):
    _, token = person_link_invite_create(person=bob_person, by=alice)
    path = reverse("person_link", args=[token])
    response = client.get(path, **hx(htmx))
    assert response.status_code == 200
    html = text(response)
    assert ("<html" in html) is (not htmx)
    assert f"{reverse('login')}?next=/links/{token}/" in html
    assert f"{reverse('signup')}?next=/links/{token}/" in html
    assert "Accept" not in html
    # Accepting while signed out goes to log in, and back here; nothing changes.
    response = client.post(reverse("person_link_accept", args=[token]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    bob_person.refresh_from_db()
    assert bob_person.linked_user is None


def test_sign_up_from_a_link_comes_back_to_it(client, alice, bob_person):
    _, token = person_link_invite_create(person=bob_person, by=alice)
    path = reverse("person_link", args=[token])
    response = client.post(
        f"{reverse('signup')}?next={path}",
        {"username": "newbob", "password1": "a very long passphrase", "password2": "a very long passphrase"},
    )
    assert response.status_code == 302 and response["Location"] == path
    assert "Accept and link my account" in text(client.get(path))


@pytest.mark.parametrize("htmx", [False, True])
def test_link_page_signed_in_says_who_invites_and_what_it_means(bob_client, alice, bob_person, htmx):
    _, token = person_link_invite_create(person=bob_person, by=alice)
    response = bob_client.get(reverse("person_link", args=[token]), **hx(htmx))
    assert response.status_code == 200
    html = text(response)
    assert "<strong>alice</strong>" in html
    assert "You decide who may see memories about you in their journal" in html
    assert "They keep their journal" in html
    assert "never their text" in html
    assert "Accept and link my account" in html


@pytest.mark.parametrize("htmx", [False, True])
def test_accepting_links_and_opens_my_consents(bob_client, alice, bob, bob_person, htmx):
    _, token = person_link_invite_create(person=bob_person, by=alice)
    response = bob_client.post(reverse("person_link_accept", args=[token]), **hx(htmx))
    expected = reverse("my_consents") + f"#linked-{bob_person.pk}"
    if htmx:
        assert response["HX-Redirect"] == expected
    else:
        assert response.status_code == 302 and response["Location"] == expected
    bob_person.refresh_from_db()
    assert bob_person.linked_user == bob
    page = text(bob_client.get(reverse("my_consents")))
    assert "alice's journal" in page and "You, as “Bob”" in page


def link_card(response) -> str:
    """The card a link page shows: the whole htmx fragment, or the card inside the page."""
    html = text(response)
    start = html.index('<section id="link-card"')
    return html[start : html.index("</section>", start)]


@pytest.mark.parametrize("htmx", [False, True])
def test_every_refused_token_is_one_404_naming_nobody_and_changes_nothing(client, alice, bob, mallory, htmx):
    """Unknown, expired, withdrawn, replaced, used, a second invitation after linking, unlinking
    or account deletion, a person linked meanwhile, one's own journal: one page (SPEC §4)."""
    cases = refused_link_tokens(alice=alice, bob=bob, mallory=mallory)
    invites, links = invites_state(), links_state()
    accepted = Notification.objects.filter(recipient=alice, kind=NotificationKind.LINK_ACCEPTED).count()
    client.force_login(mallory)
    unknown = client.get(reverse("person_link", args=[cases["unknown"].token]), **hx(htmx))
    assert unknown.status_code == 404
    card = link_card(unknown)
    assert LINK_REFUSED in card and "Accept and link my account" not in card
    for case, refused in cases.items():
        client.force_login(refused.user)
        for response in (
            client.get(reverse("person_link", args=[refused.token]), **hx(htmx)),
            client.post(reverse("person_link_accept", args=[refused.token]), **hx(htmx)),
        ):
            assert response.status_code == 404, case
            assert ("<html" in text(response)) is (not htmx)
            assert link_card(response) == card, case
            assert not [name for name in NAMES if name in link_card(response)], case
    assert (invites_state(), links_state()) == (invites, links)
    assert (
        Notification.objects.filter(recipient=alice, kind=NotificationKind.LINK_ACCEPTED).count() == accepted
    )


def test_signed_out_visitors_get_the_same_refusal(client, alice, bob, mallory):
    cases = refused_link_tokens(alice=alice, bob=bob, mallory=mallory)
    cards = set()
    del cases["own journal"]  # signed out, nobody is the journal's owner: that one works
    for refused in cases.values():
        response = client.get(reverse("person_link", args=[refused.token]))
        assert response.status_code == 404
        cards.add(link_card(response))
    [card] = cards
    assert LINK_REFUSED in card and not [name for name in NAMES if name in card]


# --- My consents -----------------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_my_consents_shows_each_audience_with_counts_and_never_a_memory(
    bob_client, alice, family, secret, linked, htmx
):
    person_set_consent(
        person=linked,
        status=ConsentStatus.REVOKED,
        actor=alice,
        reason="Not yet asked",
        audience=family.audience,
    )
    response = bob_client.get(reverse("my_consents"), **hx(htmx))
    assert response.status_code == 200
    html = text(response)
    assert ("<html" in html) is (not htmx)
    assert "alice's journal" in html
    assert "alice's agents" in html and "Family" in html
    assert "You are in 1 of alice's memories." in html
    assert "1 of alice's memories with you is shared in Family." in html
    assert "Not yet asked" in html and "by alice" in html
    assert SECRET_TITLE not in html and SECRET_BODY not in html
    assert "scan results" not in html and "hospital" not in html
    assert reverse("my_consents_revoke_all", args=[alice.pk]) in html
    assert reverse("my_unlink", args=[linked.pk]) in html
    assert 'value="granted"' in html  # the person themself may grant


def test_my_consents_is_in_the_header_for_everyone_and_empty_without_links(mallory_client):
    html = text(mallory_client.get(reverse("timeline")))
    assert f'href="{reverse("my_consents")}"' in html
    html = text(mallory_client.get(reverse("my_consents")))
    assert "No journal links you yet" in html


@pytest.mark.parametrize("htmx", [False, True])
def test_the_person_grants_revokes_and_resets_in_place(bob_client, alice, bob, linked, family, htmx):
    url = reverse("my_consent_set", args=[linked.pk])
    response = bob_client.post(
        url, {"audience": "agents", "status": "granted", "reason": "Fine by me"}, **hx(htmx)
    )
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.GRANTED
    event = ConsentEvent.objects.filter(person=linked).first()
    assert (event.actor, event.actor_kind, event.reason) == (bob, ConsentActor.SELF, "Fine by me")
    if htmx:
        html = text(response)
        assert response.status_code == 200 and "<html" not in html
        assert f'id="linked-{linked.pk}"' in html and "Saved" in html and "by you" in html
    else:
        assert response.status_code == 302
        assert response["Location"] == reverse("my_consents") + f"#linked-{linked.pk}"
    bob_client.post(url, {"audience": family.audience, "status": "revoked"}, **hx(htmx))
    assert PersonConsent.objects.get(person=linked, audience=family.audience).status == ConsentStatus.REVOKED
    bob_client.post(url, {"audience": "agents", "status": "pending"}, **hx(htmx))
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.PENDING
    assert Notification.objects.filter(recipient=alice, kind=NotificationKind.CONSENT_CHANGED).count() == 3


@pytest.mark.parametrize("htmx", [False, True])
def test_an_audience_the_owner_does_not_have_is_refused_and_nothing_changes(
    bob_client, linked, mallory, htmx
):
    strangers = circle_create(owner=mallory, name="Strangers")
    for audience in (circle_audience(strangers.pk), "everyone", ""):
        response = bob_client.post(
            reverse("my_consent_set", args=[linked.pk]),
            {"audience": audience, "status": "granted"},
            **hx(htmx),
        )
        assert response.status_code == 200
        assert "no such audience" in text(response)
    assert not ConsentEvent.objects.filter(person=linked).exists()


def test_nobody_else_decides_for_the_linked_person(mallory_client, alice_client, linked):
    url = reverse("my_consent_set", args=[linked.pk])
    assert mallory_client.post(url, {"audience": "agents", "status": "granted"}).status_code == 404
    # The owner is not the linked person either: this page does not exist for her.
    assert alice_client.post(url, {"audience": "agents", "status": "granted"}).status_code == 404
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.PENDING


@pytest.mark.parametrize("htmx", [False, True])
def test_revoke_everything_for_a_journal_after_confirming(bob_client, alice, bob, linked, family, htmx):
    url = reverse("my_consent_set", args=[linked.pk])
    bob_client.post(url, {"audience": "agents", "status": "granted"})
    bob_client.post(url, {"audience": family.audience, "status": "granted"})
    other_journal_person = person_create(
        owner=family.owner, display_name="Robert"
    )  # same journal, second entry
    _, token = person_link_invite_create(person=other_journal_person, by=alice)
    other_journal_person = person_link_accept(token=token, user=bob)
    person_set_consent(
        person=other_journal_person, status=ConsentStatus.GRANTED, actor=bob, actor_kind="self"
    )

    revoke_url = reverse("my_consents_revoke_all", args=[alice.pk])
    confirm = bob_client.get(revoke_url, **hx(htmx))
    assert confirm.status_code == 200
    assert "Revoke everything for alice's journal?" in text(confirm)
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.GRANTED  # asking changes nothing

    response = bob_client.post(revoke_url, {"reason": "Changed my mind"}, **hx(htmx))
    if htmx:
        assert response["HX-Redirect"] == reverse("my_consents")
    else:
        assert response.status_code == 302
    for person in (linked, other_journal_person):
        person.refresh_from_db()
        assert person.consent_status == ConsentStatus.REVOKED
    assert PersonConsent.objects.get(person=linked, audience=family.audience).status == ConsentStatus.REVOKED
    assert (
        ConsentEvent.objects.filter(person=linked, reason="Changed my mind", actor_kind="self").count() == 2
    )


def test_revoke_everything_is_only_for_a_journal_that_links_you(bob_client, mallory):
    assert bob_client.get(reverse("my_consents_revoke_all", args=[mallory.pk])).status_code == 404
    assert bob_client.post(reverse("my_consents_revoke_all", args=[mallory.pk])).status_code == 404


@pytest.mark.parametrize("htmx", [False, True])
def test_unlink_me_after_confirming(bob_client, alice, bob, linked, htmx):
    person_set_consent(person=linked, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF)
    url = reverse("my_unlink", args=[linked.pk])
    confirm = bob_client.get(url, **hx(htmx))
    assert confirm.status_code == 200 and "Your last choices stay" in text(confirm)
    response = bob_client.post(url, **hx(htmx))
    assert response.status_code == (200 if htmx else 302)
    linked.refresh_from_db()
    assert linked.linked_user is None and linked.consent_status == ConsentStatus.GRANTED
    assert Notification.objects.filter(recipient=alice, kind=NotificationKind.UNLINKED).exists()
    assert "No journal links you yet" in text(bob_client.get(reverse("my_consents")))
    assert bob_client.post(url).status_code == 404


# --- agents' consent requests about a linked person go to that person -------------------------------


@pytest.fixture
def caregiver(alice) -> Agent:
    return Agent.objects.get(owner=alice, name="Caregiver")


def test_a_request_about_a_linked_person_goes_to_them_and_the_owner_only_waits(
    alice_client, bob_client, alice, bob, linked, caregiver
):
    request = consent_request_create(owner=alice, person=linked, agent=caregiver)
    note = Notification.objects.get(recipient=bob, kind=NotificationKind.CONSENT_REQUEST)
    assert "alice's agent Caregiver" in note.text and note.url == reverse("my_consents")

    owner_page = text(alice_client.get(reverse("person_detail", args=[linked.pk])))
    assert "Request sent to Bob" in owner_page and "waiting for Bob" in owner_page
    assert reverse("consent_request_approve", args=[request.pk]) not in owner_page
    # A stale Approve from the owner grants nothing and says why.
    response = alice_client.post(reverse("consent_request_approve", args=[request.pk]), follow=True)
    assert response.status_code == 200 and "decides their own consent" in text(response)
    request.refresh_from_db()
    linked.refresh_from_db()
    assert request.status == ConsentRequestStatus.PENDING and linked.consent_status == ConsentStatus.PENDING

    mine = text(bob_client.get(reverse("my_consents")))
    assert "Caregiver" in mine and request.reason in mine
    assert reverse("my_consent_request_grant", args=[request.pk]) in mine


@pytest.mark.parametrize("htmx", [False, True])
def test_the_linked_person_grants_a_request_which_resolves_it(
    bob_client, alice, bob, linked, caregiver, htmx
):
    request = consent_request_create(owner=alice, person=linked, agent=caregiver)
    response = bob_client.post(reverse("my_consent_request_grant", args=[request.pk]), **hx(htmx))
    assert response.status_code == (200 if htmx else 302)
    request.refresh_from_db()
    linked.refresh_from_db()
    assert request.status == ConsentRequestStatus.APPROVED
    assert linked.consent_status == ConsentStatus.GRANTED
    event = ConsentEvent.objects.filter(person=linked).first()
    assert event.actor == bob and event.actor_kind == ConsentActor.SELF
    if htmx:
        assert "Granted" in text(response)
    # Answering twice says so.
    again = bob_client.post(reverse("my_consent_request_grant", args=[request.pk]), follow=True)
    assert "already approved" in text(again)


@pytest.mark.parametrize("htmx", [False, True])
def test_the_linked_person_dismisses_a_request(bob_client, alice, linked, caregiver, htmx):
    request = consent_request_create(owner=alice, person=linked, agent=caregiver)
    bob_client.post(reverse("my_consent_request_dismiss", args=[request.pk]), **hx(htmx))
    request.refresh_from_db()
    linked.refresh_from_db()
    assert request.status == ConsentRequestStatus.DISMISSED and linked.consent_status == ConsentStatus.PENDING


def test_nobody_else_answers_a_request_about_a_linked_person(
    mallory_client, alice_client, alice, linked, caregiver
):
    request = consent_request_create(owner=alice, person=linked, agent=caregiver)
    assert mallory_client.post(reverse("my_consent_request_grant", args=[request.pk])).status_code == 404
    assert alice_client.post(reverse("my_consent_request_grant", args=[request.pk])).status_code == 404
    request.refresh_from_db()
    assert request.status == ConsentRequestStatus.PENDING


def test_requests_about_unlinked_people_stay_with_the_owner(alice_client, alice, bob_person, caregiver):
    request = consent_request_create(owner=alice, person=bob_person, agent=caregiver)
    assert not Notification.objects.filter(kind=NotificationKind.CONSENT_REQUEST).exists()
    page = text(alice_client.get(reverse("person_detail", args=[bob_person.pk])))
    assert reverse("consent_request_approve", args=[request.pk]) in page and "Request sent to" not in page


def test_the_chat_button_says_the_request_went_to_the_linked_person(alice_client, alice, linked, caregiver):
    response = alice_client.post(
        reverse("consent_request_create"),
        {"person": linked.pk, "agent": caregiver.pk, "conversation": ""},
        **HX,
    )
    html = text(response)
    assert "Request sent to Bob" in html and "waiting for Bob" in html
    assert ConsentRequest.objects.filter(person=linked, status=ConsentRequestStatus.PENDING).exists()


# --- the inbox -------------------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_inbox_badge_counts_unread_and_opening_the_inbox_marks_them_read(
    bob_client, alice, bob, linked, htmx
):
    from inbox.services import notify

    notify(recipient=bob, kind=NotificationKind.UNLINKED, text="Older news")
    notify(recipient=bob, kind=NotificationKind.UNLINKED, text="Newer news")
    page = text(bob_client.get(reverse("timeline")))
    assert 'id="inbox-badge"' in page and 'aria-label="2 unread">2</span>' in page

    response = bob_client.get(reverse("inbox"), **hx(htmx))
    assert response.status_code == 200
    html = text(response)
    assert ("<html" in html) is (not htmx)
    assert html.index("Newer news") < html.index("Older news")  # newest first
    assert html.count("notification-unread") == 2  # shown as new this once
    assert not Notification.objects.filter(recipient=bob, read_at=None).exists()
    page = text(bob_client.get(reverse("timeline")))
    assert 'id="inbox-badge"' not in page
    assert "notification-unread" not in text(bob_client.get(reverse("inbox")))


def test_inbox_is_only_the_recipients(mallory_client, alice, bob, linked):
    html = text(mallory_client.get(reverse("inbox")))
    assert "accepted your link invitation" not in html
    assert 'id="inbox-badge"' not in text(mallory_client.get(reverse("timeline")))


def test_a_join_request_tells_the_circle_owner_with_only_the_circle_and_username(alice, bob, family):
    invite_accept(token=invite_create(circle=family, by=alice).token, user=bob)
    note = Notification.objects.get(recipient=alice, kind=NotificationKind.JOIN_REQUEST)
    assert note.text == "bob asks to join Family."
    assert note.url == f"/circles/{family.pk}/"
    invite_accept(token=invite_create(circle=family, by=alice).token, user=bob)  # asking twice: one request
    assert Notification.objects.filter(recipient=alice, kind=NotificationKind.JOIN_REQUEST).count() == 1


def test_the_inbox_never_holds_what_its_reader_may_not_see(
    alice_client, bob_client, alice, bob, bob_person, family, secret, caregiver
):
    """Every notification of every flow names people, circles and agents — never a memory."""
    _, token = person_link_invite_create(person=bob_person, by=alice)
    bob_client.post(reverse("person_link_accept", args=[token]))
    bob_person.refresh_from_db()
    consent_request_create(owner=alice, person=bob_person, agent=caregiver)
    url = reverse("my_consent_set", args=[bob_person.pk])
    bob_client.post(url, {"audience": "agents", "status": "granted", "reason": "ok"})
    bob_client.post(url, {"audience": family.audience, "status": "revoked"})
    invite_accept(token=invite_create(circle=family, by=alice).token, user=bob)
    bob_client.post(reverse("my_unlink", args=[bob_person.pk]))
    assert Notification.objects.count() >= 6
    for note in Notification.objects.all():
        assert SECRET_TITLE not in note.text and SECRET_BODY not in note.text
        assert "hospital" not in note.text.lower() and "scan" not in note.text.lower()
    for client in (alice_client, bob_client):
        html = text(client.get(reverse("inbox")))
        assert SECRET_TITLE not in html and SECRET_BODY not in html
    bob_html = text(bob_client.get(reverse("inbox")))
    assert "asks for your consent" in bob_html
