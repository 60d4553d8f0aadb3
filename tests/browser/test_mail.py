"""E-mail in headless chromium, with a real SMTP server (tests/mail/smtp.py).

"Forgot password?": Alice, with a verified address, follows the link from the log-in page,
gets the message, opens its link in the browser and chooses a new password, which then
signs her in. The invitation by e-mail: Alice sends one from her circle's page; Bob opens
the link from his message, signs up from there and asks to join. Each page is looked at
(screenshots in tests/artifacts/) at 1280 and 390 px, nothing wider than the window.

The worker's send task runs in the test process (tests/mail/conftest.py deliver_outbox);
tests/mail/test_worker_mail.py runs it in a real worker.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.urls import reverse
from playwright.sync_api import Page, expect

from circles.models import JoinRequest
from circles.services import circle_create
from tests.browser.test_accessibility import (
    WIDTHS,
    axe_page,  # noqa: F401 (the axe-core page, shared)
    blocking_violations,
    duplicate_ids,
)
from tests.browser.test_circles import PASSWORD, shoot, sign_up
from tests.mail import conftest as mail_fixtures
from tests.mail.conftest import deliver_outbox, verified

# The real SMTP server and Django's SMTP backend pointed at it, as in tests/mail/.
smtp_server = mail_fixtures.smtp_server
smtp_settings = mail_fixtures.smtp_settings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def both_widths(page: Page, artifacts_dir, name: str) -> None:
    for width in (1280, 390):
        shoot(page, artifacts_dir / f"mail_{name}_{width}.png", width=width)


def log_in(page: Page, live_server, username: str, password: str) -> None:
    page.goto(live_server.url + reverse("login"))
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button:has-text('Log in')")


def test_forgot_password_by_email_sets_a_new_password(
    live_server, browser_page, artifacts_dir, smtp_settings
):
    from accounts.services import user_signup

    alice = user_signup(username="alice", password=PASSWORD)
    verified(alice, "alice@example.org")
    page = browser_page
    page.goto(live_server.url + reverse("login"))
    both_widths(page, artifacts_dir, "login")
    page.click("text=Forgot password?")
    expect(page.locator("h1")).to_have_text("Forgot your password?")
    page.fill("#id_address", "alice@example.org")
    both_widths(page, artifacts_dir, "reset_form")
    page.click("button:has-text('Send me a link')")
    expect(page.locator("h1")).to_have_text("Check your e-mail")
    both_widths(page, artifacts_dir, "reset_sent")

    assert deliver_outbox() == 1
    (message,) = smtp_settings.to("alice@example.org")
    (link,) = [link for link in message.links() if "/password-reset/" in link]
    page.goto(live_server.url + urlsplit(link).path)
    expect(page.locator("h1")).to_have_text("Choose a new password")
    both_widths(page, artifacts_dir, "reset_choose")
    page.fill("#id_new_password1", "the tide comes in twice")
    page.fill("#id_new_password2", "the tide comes in twice")
    page.click("button:has-text('Set my new password')")
    expect(page.locator("h1")).to_have_text("Password changed")
    both_widths(page, artifacts_dir, "reset_done")

    log_in(page, live_server, "alice", "the tide comes in twice")
    expect(page).to_have_url(live_server.url + reverse("timeline"))


def test_circle_invitation_by_email_brings_a_new_person_in(
    live_server,
    new_person_page,
    artifacts_dir,
    smtp_settings,
):
    from accounts.services import user_signup

    alice = user_signup(username="alice", password=PASSWORD)
    family = circle_create(owner=alice, name="Family", description="Grandma's stories")
    alice_page = new_person_page()
    log_in(alice_page, live_server, "alice", PASSWORD)
    alice_page.goto(live_server.url + reverse("circle_detail", args=[family.pk]))
    invites = alice_page.locator("#circle-invites")
    invites.get_by_label("E-mail address or username").fill("bob@example.org")
    invites.locator("button:has-text('Send an invitation')").click()
    expect(alice_page.locator("#circle-invites .saved")).to_contain_text(
        "Invitation sent by e-mail to bob@example.org"
    )
    invites.scroll_into_view_if_needed()
    for width in (1280, 390):
        shoot(alice_page, artifacts_dir / f"mail_invite_sent_{width}.png", width=width, element=invites)
    expect(alice_page.locator("#circle-invites button:has-text('Make an invite link')")).to_be_visible()

    assert deliver_outbox() == 1
    (message,) = smtp_settings.to("bob@example.org")
    assert "alice invites you to the circle Family" in message.subject
    (link,) = [link for link in message.links() if "/circles/invites/" in link]

    bob_page = new_person_page()
    invite_url = live_server.url + urlsplit(link).path
    bob_page.goto(invite_url)
    expect(bob_page.locator("#invite-card")).to_contain_text("alice invites you to join Family")
    both_widths(bob_page, artifacts_dir, "invite_opened")
    bob_page.click("#invite-card >> text=Sign up")
    sign_up(bob_page, "bob")
    expect(bob_page).to_have_url(invite_url)
    bob_page.click("button:has-text('Ask to join')")
    expect(bob_page.locator("#invite-card")).to_contain_text("Waiting for alice to approve")
    assert JoinRequest.objects.filter(circle=family, user__username="bob").exists()


def test_email_settings_page(live_server, browser_page, artifacts_dir, smtp_settings):
    from accounts.services import user_signup

    user_signup(username="alice", password=PASSWORD)
    page = browser_page
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(live_server.url + reverse("mail_settings"))
    page.fill("#id_address", "alice@example.org")
    page.click("button:has-text('Send a verification link')")
    expect(page.locator("#address .notice")).to_contain_text("alice@example.org")
    deliver_outbox()
    (message,) = smtp_settings.to("alice@example.org")
    (link,) = [link for link in message.links() if "/email/verify/" in link]
    page.goto(live_server.url + urlsplit(link).path)
    page.click("button:has-text('Verify my address')")
    expect(page.locator("#address")).to_contain_text("Verified")
    page.check("input[name=daily_digest]")
    page.click("#digest button:has-text('Save')")
    expect(page.locator("body")).to_contain_text("Daily digest on")
    both_widths(page, artifacts_dir, "settings")
    assert page.input_value("#id_address") == ""  # the field is for a new address
    expect(page.locator("#address button[type=submit]").first).to_have_text("Change my address")


def test_link_invitation_to_a_username_reaches_their_inbox(live_server, new_person_page, artifacts_dir):
    from accounts.services import user_signup
    from people.services import person_create

    alice = user_signup(username="alice", password=PASSWORD)
    user_signup(username="bob", password=PASSWORD)
    ben = person_create(owner=alice, display_name="Ben")
    alice_page = new_person_page()
    log_in(alice_page, live_server, "alice", PASSWORD)
    alice_page.goto(live_server.url + reverse("person_detail", args=[ben.pk]))
    panel = alice_page.locator("#link-panel")
    panel.get_by_label("Or send it: their e-mail address or username").fill("bob")
    panel.locator("button:has-text('Send the invitation')").click()
    expect(alice_page.locator("#link-panel .saved")).to_contain_text("Invitation sent to bob's inbox")
    for width in (1280, 390):
        shoot(alice_page, artifacts_dir / f"mail_link_invite_sent_{width}.png", width=width, element=panel)

    bob_page = new_person_page()
    log_in(bob_page, live_server, "bob", PASSWORD)
    bob_page.goto(live_server.url + reverse("inbox"))
    note = bob_page.locator("a", has_text="alice invites you to link your account")
    expect(note).to_be_visible()
    assert "Ben" not in note.inner_text()
    note.click()
    bob_page.click("button:has-text('Accept and link my account')")
    ben.refresh_from_db()
    assert ben.linked_user.username == "bob"


def test_mail_pages_have_no_serious_accessibility_violations(live_server, axe_page):  # noqa: F811
    from accounts.services import user_signup

    alice = user_signup(username="alice", password=PASSWORD)
    family = circle_create(owner=alice, name="Family", description="")
    page = axe_page
    signed_out = [reverse("login"), reverse("mail_password_reset"), reverse("mail_password_reset_sent")]
    signed_in = [reverse("mail_settings"), reverse("circle_detail", args=[family.pk])]
    found = {}
    for path in signed_out:
        page.goto(live_server.url + path)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            found[(path, width)] = blocking_violations(page) + duplicate_ids(page)
    log_in(page, live_server, "alice", PASSWORD)
    for path in signed_in:
        page.goto(live_server.url + path)
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            found[(path, width)] = blocking_violations(page) + duplicate_ids(page)
    assert {key: value for key, value in found.items() if value} == {}
