"""Signed-in browsers: the Sessions page's records, signing out others, and new-browser notices."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from django.urls import reverse

from accounts import sessions
from accounts.models import SignedInSession
from inbox.models import Notification

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"
FIREFOX_WINDOWS = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0"
SAFARI_IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"
)


def _browser(user_agent: str) -> Client:
    return Client(HTTP_USER_AGENT=user_agent)


def _log_in(client: Client, username: str = "alice"):
    return client.post(reverse("login"), {"username": username, "password": PASSWORD})


@pytest.mark.parametrize(
    ("user_agent", "device"),
    [
        (FIREFOX_WINDOWS, "Firefox on Windows"),
        (SAFARI_IPHONE, "Safari on iPhone"),
        (
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/131.0 Safari/537.36",
            "Chrome on Linux",
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/131.0 Safari/537.36 Edg/131.0",
            "Edge on Windows",
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
            "Version/18.1 Safari/605.1.15",
            "Safari on Mac",
        ),
        (
            "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
            "Chrome/131.0 Mobile Safari/537.36",
            "Chrome on Android",
        ),
        ("curl/8.5.0", "A program (curl)"),
        ("", "An unknown browser"),
    ],
)
def test_the_device_is_named_in_plain_words(user_agent, device):
    assert sessions.device_describe(user_agent) == device


def test_a_sign_in_is_recorded_and_listed_with_device_address_and_times(alice):
    browser = _browser(FIREFOX_WINDOWS)
    _log_in(browser)
    record = SignedInSession.objects.get(owner=alice)
    assert record.session_key == browser.session.session_key
    assert (record.device, record.address, record.method) == ("Firefox on Windows", "127.0.0.1", "password")
    page = browser.get(reverse("session_list"))
    assert page.status_code == 200
    assert page.context["current"] == record
    assert "Firefox on Windows" in page.content.decode()


def test_the_page_names_browsers_by_id_never_by_session_key(alice):
    firefox, safari = _browser(FIREFOX_WINDOWS), _browser(SAFARI_IPHONE)
    _log_in(firefox)
    _log_in(safari)
    page = firefox.get(reverse("session_list")).content.decode()
    assert "Safari on iPhone" in page
    assert safari.session.session_key not in page
    assert firefox.session.session_key not in page


def test_last_seen_is_written_at_most_once_a_minute(alice, monkeypatch):
    browser = _browser(FIREFOX_WINDOWS)
    _log_in(browser)
    first = SignedInSession.objects.get(owner=alice).last_seen_at
    browser.get(reverse("timeline"))
    assert SignedInSession.objects.get(owner=alice).last_seen_at == first
    later = time.time() + 61
    monkeypatch.setattr(sessions.time, "time", lambda: later)
    browser.get(reverse("timeline"))
    assert SignedInSession.objects.get(owner=alice).last_seen_at > first


def test_sign_out_everywhere_else_signs_the_others_out_and_keeps_this_one(alice):
    firefox, safari, phone = _browser(FIREFOX_WINDOWS), _browser(SAFARI_IPHONE), _browser(SAFARI_IPHONE)
    for browser in (firefox, safari, phone):
        _log_in(browser)
    response = firefox.post(reverse("sessions_end_others"))
    assert response.status_code == 302
    assert firefox.get(reverse("timeline")).status_code == 200
    assert safari.get(reverse("timeline")).status_code == 302
    assert phone.get(reverse("timeline")).status_code == 302
    assert list(SignedInSession.objects.filter(owner=alice).values_list("session_key", flat=True)) == [
        firefox.session.session_key
    ]


def test_sign_out_one_browser(alice):
    firefox, safari = _browser(FIREFOX_WINDOWS), _browser(SAFARI_IPHONE)
    _log_in(firefox)
    _log_in(safari)
    other = SignedInSession.objects.get(session_key=safari.session.session_key)
    assert firefox.post(reverse("session_end", args=[other.pk])).status_code == 302
    assert safari.get(reverse("timeline")).status_code == 302
    assert firefox.get(reverse("timeline")).status_code == 200


def test_another_persons_session_is_a_404_and_stays_signed_in(alice, mallory):
    alice_browser, mallory_browser = _browser(FIREFOX_WINDOWS), _browser(SAFARI_IPHONE)
    _log_in(alice_browser)
    _log_in(mallory_browser, "mallory")
    mallorys = SignedInSession.objects.get(owner=mallory)
    assert alice_browser.post(reverse("session_end", args=[mallorys.pk])).status_code == 404
    alice_browser.post(reverse("sessions_end_others"))
    assert mallory_browser.get(reverse("timeline")).status_code == 200


def test_a_session_with_no_record_is_signed_out(alice):
    """Signed out elsewhere (or from before the records): its next request is anonymous."""
    browser = _browser(FIREFOX_WINDOWS)
    _log_in(browser)
    SignedInSession.objects.filter(owner=alice).delete()
    session = browser.session
    session[sessions.SEEN_AT] = 0  # its once-a-minute check is due
    session.save()
    assert browser.get(reverse("timeline")).status_code == 302


def test_a_password_change_keeps_the_record_under_the_new_session_key(alice):
    browser = _browser(FIREFOX_WINDOWS)
    _log_in(browser)
    response = browser.post(
        reverse("password_change"),
        {
            "old_password": PASSWORD,
            "new_password1": "a new sturdy passphrase",
            "new_password2": "a new sturdy passphrase",
        },
    )
    assert response.status_code == 302
    session = browser.session
    session[sessions.SEEN_AT] = 0
    session.save()
    assert browser.get(reverse("timeline")).status_code == 200
    assert SignedInSession.objects.get(owner=alice).session_key == browser.session.session_key


def test_a_password_change_signs_the_other_browsers_out_and_the_page_says_so(alice):
    firefox, safari = _browser(FIREFOX_WINDOWS), _browser(SAFARI_IPHONE)
    _log_in(firefox)
    _log_in(safari)
    new = "a new sturdy passphrase"
    firefox.post(
        reverse("password_change"), {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )
    page = firefox.get(reverse("session_list"))
    assert page.status_code == 200
    assert page.context["current"].session_key == firefox.session.session_key
    assert page.context["others"] == []
    assert safari.get(reverse("timeline")).status_code == 302


def test_a_password_reset_elsewhere_takes_the_old_browsers_off_the_page(alice):
    firefox, safari = _browser(FIREFOX_WINDOWS), _browser(SAFARI_IPHONE)
    _log_in(safari)
    alice.set_password("reset by e-mail")  # as a password reset does, from no session
    alice.save()
    firefox.post(reverse("login"), {"username": "alice", "password": "reset by e-mail"})
    page = firefox.get(reverse("session_list"))
    assert page.context["others"] == []
    assert list(SignedInSession.objects.filter(owner=alice).values_list("device", flat=True)) == [
        "Firefox on Windows"
    ]
    assert not safari.session.exists(safari.session.session_key)
    assert safari.get(reverse("timeline")).status_code == 302


def test_log_out_removes_the_record(alice):
    browser = _browser(FIREFOX_WINDOWS)
    _log_in(browser)
    browser.post(reverse("logout"))
    assert not SignedInSession.objects.filter(owner=alice).exists()


def test_records_of_ended_sessions_leave_the_list(alice):
    firefox, safari = _browser(FIREFOX_WINDOWS), _browser(SAFARI_IPHONE)
    _log_in(firefox)
    _log_in(safari)
    safari.session.delete()  # expired or cleared by the store
    page = firefox.get(reverse("session_list"))
    assert page.context["others"] == []
    assert SignedInSession.objects.filter(owner=alice).count() == 1


# --- New browsers --------------------------------------------------------------------


def _new_sign_in_notices(user) -> list[Notification]:
    return list(Notification.objects.filter(recipient=user, kind=sessions.NEW_SIGN_IN_KIND))


def test_a_sign_in_from_a_new_browser_leaves_a_notice_and_a_known_one_does_not(alice):
    browser = _browser(FIREFOX_WINDOWS)
    _log_in(browser)
    [notice] = _new_sign_in_notices(alice)
    assert "Firefox on Windows" in notice.text and "127.0.0.1" in notice.text
    assert notice.url == reverse("session_list")
    assert sessions.KNOWN_BROWSER_COOKIE in browser.cookies
    inbox = browser.get(reverse("inbox")).content.decode()
    assert "New sign-in ·" in inbox and "new_sign_in" not in inbox  # its kind in words
    browser.post(reverse("logout"))
    _log_in(browser)
    assert len(_new_sign_in_notices(alice)) == 1
    _log_in(_browser(SAFARI_IPHONE))
    assert len(_new_sign_in_notices(alice)) == 2


def test_a_forged_known_browser_cookie_is_ignored(alice):
    browser = _browser(FIREFOX_WINDOWS)
    browser.cookies[sessions.KNOWN_BROWSER_COOKIE] = str(alice.pk)
    _log_in(browser)
    assert len(_new_sign_in_notices(alice)) == 1


def test_the_browser_that_signed_up_is_known_at_its_next_sign_in(db):
    browser = _browser(FIREFOX_WINDOWS)
    browser.post(
        reverse("signup"),
        {"username": "carol", "email": "", "password1": PASSWORD, "password2": PASSWORD},
    )
    browser.post(reverse("logout"))
    _log_in(browser, "carol")
    assert Notification.objects.filter(kind=sessions.NEW_SIGN_IN_KIND).count() == 0


def test_one_browser_known_for_alice_is_still_new_for_mallory(alice, mallory):
    browser = _browser(FIREFOX_WINDOWS)
    _log_in(browser)
    browser.post(reverse("logout"))
    _log_in(browser, "mallory")
    assert len(_new_sign_in_notices(mallory)) == 1
