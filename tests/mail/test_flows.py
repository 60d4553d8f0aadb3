"""E-mail flows against a real SMTP server (tests/mail/smtp.py): each message, its link
followed with the test client to the end of its flow.

The worker's task runs here (deliver_outbox); tests/mail/test_worker_mail.py runs it in a
real worker. A request only ever writes the outbox: nothing reaches the server until
the task runs.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from circles.models import CircleMembership, JoinRequest
from circles.services import circle_create
from inbox.models import Notification, NotificationKind
from mail import services, tasks
from mail.models import DigestDay, EmailAddress, OutgoingEmail
from memories.services import ParticipantSpec, memory_create
from people.models import Person, PersonLinkInvite
from people.services import person_create
from tests.mail.conftest import PASSWORD, deliver_outbox, verified

pytestmark = pytest.mark.django_db


def hx(htmx: bool) -> dict:
    return {"HTTP_HX_REQUEST": "true"} if htmx else {}


@pytest.fixture(params=[False, True], ids=["plain", "htmx"])
def htmx(request) -> bool:
    return request.param


@pytest.fixture
def bob(db):
    from accounts.services import user_signup

    return user_signup(username="bob", password=PASSWORD)


def path_of(link: str) -> str:
    parts = urlsplit(link)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def only_message(server, address: str):
    received = server.to(address)
    assert len(received) == 1, [r.subject for r in server.messages]
    assert received[0].text.strip() and received[0].html.strip()  # both parts, every message
    return received[0]


# --- the address and its verification -------------------------------------------------------


def test_adding_an_address_sends_a_link_that_verifies_it(alice_client, alice, smtp_settings):
    response = alice_client.post(reverse("mail_address_set"), {"address": "alice@example.org"})
    assert response.status_code == 302
    assert smtp_settings.messages == []  # the request only queued it
    assert not EmailAddress.objects.get(owner=alice).is_verified

    assert deliver_outbox() == 1
    message = only_message(smtp_settings, "alice@example.org")
    assert "Verify" in message.subject and "alice" in message.text
    (link,) = [link for link in message.links() if "/email/verify/" in link]
    assert link in message.html

    page = alice_client.get(path_of(link))
    assert page.status_code == 200 and b"Verify my address" in page.content
    assert not EmailAddress.objects.get(owner=alice).is_verified  # opening the link changes nothing
    done = alice_client.post(path_of(link))
    assert done.status_code == 302 and done["Location"] == reverse("mail_settings")
    row = EmailAddress.objects.get(owner=alice)
    assert row.is_verified and row.address == "alice@example.org" and row.pending == ""
    assert OutgoingEmail.objects.get().text == ""  # sent: the body (with its link) is not kept


def test_a_new_address_waits_and_the_old_one_stays_until_verified(alice_client, alice, smtp_settings):
    verified(alice, "old@example.org")
    alice_client.post(reverse("mail_address_set"), {"address": "typo@exmaple.org"})
    row = EmailAddress.objects.get(owner=alice)
    assert row.address == "old@example.org" and row.pending == "typo@exmaple.org"
    page = alice_client.get(reverse("mail_settings"))
    assert b"old@example.org" in page.content and b"typo@exmaple.org" in page.content


def test_a_replaced_link_and_a_bad_link_do_nothing(alice_client, alice, smtp_settings):
    alice_client.post(reverse("mail_address_set"), {"address": "first@example.org"})
    alice_client.post(reverse("mail_address_set"), {"address": "second@example.org"})
    deliver_outbox()
    (first,) = [link for link in only_message(smtp_settings, "first@example.org").links() if "verify" in link]
    refused = Client().post(path_of(first))
    assert refused.status_code == 404 and b"replaced" in refused.content
    assert Client().post(path_of(first)[:-3] + "xyz/").status_code == 404
    assert not EmailAddress.objects.get(owner=alice).is_verified


def test_an_address_another_account_verified_cannot_be_verified_again(alice, bob, smtp_settings):
    verified(bob, "shared@example.org")
    services.email_address_request(user=alice, address="Shared@example.org", site_url="http://testserver")
    deliver_outbox()
    (link,) = [link for link in only_message(smtp_settings, "Shared@example.org").links() if "verify" in link]
    response = Client().post(path_of(link))
    assert response.status_code == 404 and b"Another account" in response.content
    assert not EmailAddress.objects.get(owner=alice).is_verified


def test_the_link_verifies_from_a_browser_that_is_not_signed_in(alice, smtp_settings):
    services.email_address_request(user=alice, address="alice@example.org", site_url="http://testserver")
    deliver_outbox()
    (link,) = [link for link in only_message(smtp_settings, "alice@example.org").links() if "verify" in link]
    response = Client().post(path_of(link))
    assert response.status_code == 200 and b"Address verified" in response.content
    assert EmailAddress.objects.get(owner=alice).is_verified


def test_the_settings_page_links_to_the_email_page(alice_client):
    assert reverse("mail_settings").encode() in alice_client.get(reverse("settings")).content
    page = alice_client.get(reverse("mail_settings"))
    assert page.status_code == 200 and b"Daily digest" in page.content


# --- password reset ---------------------------------------------------------------------------


def test_sign_in_page_offers_forgot_password(client):
    page = client.get(reverse("login"))
    assert b"Forgot password?" in page.content and reverse("mail_password_reset").encode() in page.content


def test_password_reset_by_email_sets_a_new_password(alice, smtp_settings):
    verified(alice, "alice@example.org")
    visitor = Client()
    response = visitor.post(reverse("mail_password_reset"), {"address": "ALICE@example.org"})
    assert response.status_code == 302 and response["Location"] == reverse("mail_password_reset_sent")
    assert smtp_settings.messages == []
    deliver_outbox()
    message = only_message(smtp_settings, "alice@example.org")
    assert "password" in message.subject.lower()
    (link,) = [link for link in message.links() if "/password-reset/" in link]

    form_page = visitor.get(path_of(link), follow=True)
    assert b"Choose a new password" in form_page.content
    set_url = form_page.redirect_chain[-1][0]
    done = visitor.post(
        set_url, {"new_password1": "a brand new secret 42", "new_password2": "a brand new secret 42"}
    )
    assert done.status_code == 302 and done["Location"] == reverse("mail_password_reset_done")
    alice.refresh_from_db()
    assert alice.check_password("a brand new secret 42")
    signed_in = Client().post(reverse("login"), {"username": "alice", "password": "a brand new secret 42"})
    assert signed_in.status_code == 302

    again = Client().get(path_of(link), follow=True)  # the link works once
    assert b"can&#x27;t be used" in again.content or b"can't be used" in again.content


def test_reset_answers_the_same_for_an_unknown_or_unverified_address(alice, bob, smtp_settings):
    verified(alice, "alice@example.org")
    EmailAddress.objects.create(owner=bob, pending="bob@example.org", pending_sent_at=timezone.now())
    answers = []
    for address in ["alice@example.org", "nobody@example.org", "bob@example.org"]:
        response = Client().post(reverse("mail_password_reset"), {"address": address})
        answers.append((response.status_code, response["Location"]))
    assert len(set(answers)) == 1
    deliver_outbox()
    assert [received.to for received in smtp_settings.messages] == ["alice@example.org"]


def test_reset_form_shows_an_error_for_a_malformed_address(client):
    response = client.post(reverse("mail_password_reset"), {"address": "not an address"})
    assert response.status_code == 400 and b"valid email" in response.content
    assert not OutgoingEmail.objects.exists()


# --- circle invitations ---------------------------------------------------------------------


def test_circle_invitation_by_email_names_inviter_and_circle_and_its_link_joins(
    alice_client, alice, bob, smtp_settings, htmx
):
    family = circle_create(owner=alice, name="Family", description="")
    url = reverse("circle_invite_send", args=[family.pk])
    response = alice_client.post(url, {"to": "bob@example.org"}, **hx(htmx))
    assert response.status_code == (200 if htmx else 302)
    page = response.content if htmx else alice_client.get(response["Location"]).content
    assert b"Invitation sent by e-mail to bob@example.org" in page
    deliver_outbox()
    message = only_message(smtp_settings, "bob@example.org")
    assert "alice" in message.subject and "Family" in message.subject
    (link,) = [link for link in message.links() if "/circles/invites/" in link]

    bob_client = Client()
    bob_client.force_login(bob)
    invite_page = bob_client.get(path_of(link))
    assert invite_page.status_code == 200 and b"Family" in invite_page.content
    bob_client.post(path_of(link) + "ask/")
    assert JoinRequest.objects.filter(circle=family, user=bob).exists()


def test_circle_invitation_to_a_username_arrives_in_their_inbox(alice_client, alice, bob, smtp_settings):
    family = circle_create(owner=alice, name="Family", description="")
    alice_client.post(reverse("circle_invite_send", args=[family.pk]), {"to": "bob"})
    note = Notification.objects.get(recipient=bob)
    assert note.kind == NotificationKind.CIRCLE_INVITE and "alice" in note.text and "Family" in note.text
    bob_client = Client()
    bob_client.force_login(bob)
    assert note.url.encode() in bob_client.get(reverse("inbox")).content
    bob_client.post(note.url + "ask/")
    assert JoinRequest.objects.filter(circle=family, user=bob).exists()
    assert deliver_outbox() == 0  # an inbox, not an e-mail


def test_circle_invitation_to_no_such_account_says_so_and_makes_nothing(alice_client, alice):
    family = circle_create(owner=alice, name="Family", description="")
    response = alice_client.post(reverse("circle_invite_send", args=[family.pk]), {"to": "nobody"})
    assert response.status_code == 400 and "No account is called “nobody”".encode() in response.content
    assert not family.invites.exists() and not Notification.objects.exists()


def test_only_the_circle_owner_sends_invitations(alice, bob, smtp_settings):
    family = circle_create(owner=alice, name="Family", description="")
    CircleMembership.objects.create(circle=family, user=bob, role="member")
    bob_client = Client()
    bob_client.force_login(bob)
    assert (
        bob_client.post(reverse("circle_invite_send", args=[family.pk]), {"to": "x@example.org"}).status_code
        == 404
    )
    assert not OutgoingEmail.objects.exists()


def test_the_copied_invite_link_is_still_offered(alice_client, alice):
    family = circle_create(owner=alice, name="Family", description="")
    page = alice_client.get(reverse("circle_detail", args=[family.pk])).content
    assert b"Make an invite link" in page and b"Send an invitation" in page


# --- link invitations -----------------------------------------------------------------------


@pytest.fixture
def ben(alice):
    return person_create(owner=alice, display_name="Benedict Quillfeather")


def test_link_invitation_by_email_never_names_the_person_and_its_link_links(
    alice_client, alice, bob, ben, smtp_settings, htmx
):
    response = alice_client.post(
        reverse("person_link_invite_send", args=[ben.pk]), {"to": "bob@example.org"}, **hx(htmx)
    )
    assert b"Invitation sent by e-mail to bob@example.org" in response.content
    deliver_outbox()
    message = only_message(smtp_settings, "bob@example.org")
    assert "alice" in message.subject
    assert "Quillfeather" not in message.whole and "Benedict" not in message.whole
    (link,) = [link for link in message.links() if "/links/" in link]
    bob_client = Client()
    bob_client.force_login(bob)
    assert bob_client.get(path_of(link)).status_code == 200
    bob_client.post(path_of(link) + "accept/")
    ben.refresh_from_db()
    assert ben.linked_user_id == bob.pk


def test_link_invitation_to_a_username_arrives_in_their_inbox_and_replaces_the_copied_link(
    alice_client, alice, bob, ben
):
    alice_client.post(reverse("person_link_invite_create", args=[ben.pk]))
    alice_client.post(reverse("person_link_invite_send", args=[ben.pk]), {"to": "bob"})
    assert PersonLinkInvite.objects.filter(person=ben, revoked_at=None).count() == 1
    note = Notification.objects.get(recipient=bob, kind=NotificationKind.LINK_INVITE)
    assert "Quillfeather" not in note.text
    bob_client = Client()
    bob_client.force_login(bob)
    bob_client.post(note.url + "accept/")
    ben.refresh_from_db()
    assert ben.linked_user_id == bob.pk


def test_link_invitation_to_yourself_is_refused(alice_client, alice, ben):
    response = alice_client.post(reverse("person_link_invite_send", args=[ben.pk]), {"to": "alice"})
    assert b"That is your own account." in response.content
    assert not PersonLinkInvite.objects.filter(person=ben).exists()


# --- the daily digest -----------------------------------------------------------------------


def test_digest_needs_a_verified_address(alice_client, alice):
    response = alice_client.post(reverse("mail_digest_set"), {"daily_digest": "on"})
    assert response.status_code == 400 and b"Verify an e-mail address first" in response.content
    assert not EmailAddress.objects.filter(owner=alice, daily_digest=True).exists()


def test_digest_brings_inbox_and_on_this_day_at_most_once_a_day(alice_client, alice, ben, smtp_settings):
    verified(alice, "alice@example.org")
    assert alice_client.post(reverse("mail_digest_set"), {"daily_digest": "on"}).status_code == 302
    today = timezone.localdate()
    years_ago = timezone.localtime().replace(year=today.year - 3)
    memory_create(
        owner=alice,
        body="Picnic by the lighthouse with Benedict",
        occurred_at=years_ago,
        participants=[ParticipantSpec(person=ben, role="subject")],
    )
    Notification.objects.create(
        recipient=alice, kind="join_request", text="bob asks to join Family.", url="/circles/"
    )

    assert services.digest_make(user_id=alice.pk, day=today) is not None
    assert services.digest_make(user_id=alice.pk, day=today) is None  # the day is taken
    tasks.digests.apply()  # the beat's run finds nobody due today
    deliver_outbox()
    message = only_message(smtp_settings, "alice@example.org")
    assert "Picnic by the lighthouse" in message.text and "3 years ago" in message.text
    assert "bob asks to join Family." in message.text and "bob asks to join Family." in message.html
    for link in message.links():
        assert alice_client.get(path_of(link)).status_code == 200, link
    assert DigestDay.objects.get(owner=alice).sent


def test_digest_says_nothing_on_a_quiet_day_and_nothing_when_off(alice, bob, smtp_settings):
    verified(alice, "alice@example.org")
    EmailAddress.objects.filter(owner=alice).update(daily_digest=True)
    verified(bob, "bob@example.org")  # digest off
    Notification.objects.create(recipient=bob, kind="join_request", text="x asks to join Y.")
    today = timezone.localdate()
    assert services.digest_make(user_id=alice.pk, day=today) is None
    assert services.digest_make(user_id=bob.pk, day=today) is None
    assert DigestDay.objects.filter(owner=alice, sent=False).exists() and not DigestDay.objects.filter(
        owner=bob
    )
    assert deliver_outbox() == 0


def test_the_beat_queues_digests_from_the_configured_hour(alice, settings, monkeypatch):
    verified(alice, "alice@example.org")
    EmailAddress.objects.filter(owner=alice).update(daily_digest=True)
    queued = []
    monkeypatch.setattr("memories.tasks.enqueue", lambda task, *args, **kw: queued.append((task.name, args)))
    settings.MAIL_DIGEST_HOUR = 24  # never reached
    assert tasks.digests.apply().get() == 0
    settings.MAIL_DIGEST_HOUR = 0
    assert tasks.digests.apply().get() == 1
    assert queued == [("mail.digest", (alice.pk, timezone.localdate().isoformat()))]


# --- sending: never in the request, retried, never lost -------------------------------------


def test_a_request_succeeds_while_the_mail_server_refuses(alice_client, alice, smtp_settings):
    smtp_settings.refuse_next(1)
    family = circle_create(owner=alice, name="Family", description="")
    response = alice_client.post(reverse("circle_invite_send", args=[family.pk]), {"to": "bob@example.org"})
    assert response.status_code == 302 and family.invites.count() == 1
    email = OutgoingEmail.objects.get()
    tasks.send.apply(args=[email.pk])
    email.refresh_from_db()
    assert email.sent_at is None and email.attempts == 1 and "451" in email.last_error
    assert email.claimed_until > timezone.now()  # held until the retry is due: the sweep leaves it
    assert tasks.sweep.apply().get() == 0
    OutgoingEmail.objects.filter(pk=email.pk).update(claimed_until=timezone.now() - timedelta(seconds=1))
    tasks.send.apply(args=[email.pk])
    email.refresh_from_db()
    assert email.sent_at is not None and email.attempts == 2
    assert len(smtp_settings.to("bob@example.org")) == 1
    tasks.send.apply(args=[email.pk])  # redelivered: sends nothing twice
    assert len(smtp_settings.to("bob@example.org")) == 1


def test_a_permanent_refusal_is_not_retried(alice, smtp_settings, monkeypatch):
    import smtplib

    def refuse(self, *args, **kwargs):
        raise smtplib.SMTPRecipientsRefused({"x@example.org": (550, b"No such user")})

    monkeypatch.setattr("django.core.mail.backends.smtp.EmailBackend.send_messages", refuse)
    services.email_address_request(user=alice, address="x@example.org", site_url="http://testserver")
    deliver_outbox()
    email = OutgoingEmail.objects.get()
    assert email.failed_at is not None and email.sent_at is None and "550" in email.last_error


def test_the_sweep_queues_a_message_whose_publish_was_lost(alice, settings, monkeypatch):
    published = []
    monkeypatch.setattr("mail.services.email_publish", lambda *, email_id: published.append(email_id))
    services.email_address_request(user=alice, address="x@example.org", site_url="http://testserver")
    email = OutgoingEmail.objects.get()
    assert tasks.sweep.apply().get() == 0  # too young: its own publish may still come
    OutgoingEmail.objects.filter(pk=email.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    assert tasks.sweep.apply().get() == 1 and published == [email.pk]


def test_deleting_an_account_takes_its_address_and_waiting_mail(alice):
    verified(alice, "alice@example.org")
    services.email_address_request(user=alice, address="new@example.org", site_url="http://testserver")
    get_user_model().objects.filter(pk=alice.pk).delete()
    assert not EmailAddress.objects.exists() and not OutgoingEmail.objects.exists()
    assert Person.objects.filter(owner_id=alice.pk).count() == 0


def test_an_account_asking_for_too_many_messages_is_told_and_nothing_is_sent(alice_client, alice, settings):
    settings.KEEPSAKE_RATELIMITS = settings.KEEPSAKE_RATELIMITS | {"mail_per_account": "2/d"}
    family = circle_create(owner=alice, name="Family", description="")
    url = reverse("circle_invite_send", args=[family.pk])
    for number in range(2):
        assert alice_client.post(url, {"to": f"friend{number}@example.org"}).status_code == 302
    refused = alice_client.post(url, {"to": "friend9@example.org"})
    assert refused.status_code == 400 and b"try again tomorrow" in refused.content
    ben = person_create(owner=alice, display_name="Ben")
    panel = alice_client.post(reverse("person_link_invite_send", args=[ben.pk]), {"to": "x@example.org"})
    assert b"try again tomorrow" in panel.content
    assert OutgoingEmail.objects.count() == 2 and family.invites.count() == 2
    assert not PersonLinkInvite.objects.filter(person=ben).exists()
