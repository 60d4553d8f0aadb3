"""Two-factor sign-in: enrolment, the second step, recovery codes, turning it off — the rules."""

from __future__ import annotations

import hashlib

import pytest
from django.urls import reverse
from django_otp.plugins.otp_totp.models import TOTPDevice

from accounts.models import RecoveryCode, SignedInSession
from accounts.two_factor import (
    PENDING_MAX_FAILURES,
    recovery_code_use,
    second_factor_verify,
    totp_enrolment_confirm,
    totp_enrolment_start,
    totp_verify,
    two_factor_enabled,
)
from inbox.models import Notification
from tests.accounts.two_factor_helpers import enrol, totp_code, wrong_code

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"


def _password_step(client, username="alice", next_url=""):
    data = {"username": username, "password": PASSWORD}
    if next_url:
        data["next"] = next_url
    return client.post(reverse("login"), data)


def _signed_in(client) -> bool:
    return client.get(reverse("timeline")).status_code == 200


# --- Enrolment -------------------------------------------------------------------


def test_enrolment_shows_a_qr_code_as_inline_svg_and_the_secret_and_is_never_cached(alice_client):
    response = alice_client.get(reverse("two_factor_setup"))
    assert response.status_code == 200
    page = response.content.decode()
    assert '<svg width="' in page and 'class="totp-qr"' in page
    assert "style=" not in page.split('class="totp-qr"', 1)[1].split("</svg>", 1)[0]
    device = TOTPDevice.objects.get(user__username="alice")
    assert device.confirmed is False
    assert "no-store" in response["Cache-Control"]
    # A reload shows the same secret: the app the person already scanned keeps working.
    alice_client.get(reverse("two_factor_setup"))
    assert TOTPDevice.objects.filter(user__username="alice").count() == 1


def test_a_wrong_confirmation_code_leaves_two_factor_off(alice, alice_client):
    alice_client.get(reverse("two_factor_setup"))
    device = TOTPDevice.objects.get(user=alice)
    response = alice_client.post(reverse("two_factor_setup"), {"code": wrong_code(device)})
    assert response.status_code == 200
    assert "That code does not match" in response.content.decode()
    assert not two_factor_enabled(user=alice)
    assert not RecoveryCode.objects.filter(owner=alice).exists()


def test_confirming_turns_it_on_shows_ten_recovery_codes_once_and_stores_only_hashes(alice, alice_client):
    alice_client.get(reverse("two_factor_setup"))
    device = TOTPDevice.objects.get(user=alice)
    response = alice_client.post(reverse("two_factor_setup"), {"code": totp_code(device)})
    assert response.status_code == 200
    assert two_factor_enabled(user=alice)
    codes = response.context["codes"]
    assert len(codes) == 10 and len(set(codes)) == 10
    page = response.content.decode()
    stored = set(RecoveryCode.objects.filter(owner=alice).values_list("code_hash", flat=True))
    for code in codes:
        assert code in page
        assert code not in stored
        assert hashlib.sha256(code.replace("-", "").encode()).hexdigest() in stored
    # The page is never shown again: the Security page only counts them.
    security = alice_client.get(reverse("account_security")).content.decode()
    assert codes[0] not in security and "10</strong> of 10" in security


def test_enrolling_signs_out_every_other_browser(alice, client, django_user_model):
    from django.test import Client

    other = Client()
    other.force_login(alice)
    client.force_login(alice)
    client.get(reverse("two_factor_setup"))
    device = TOTPDevice.objects.get(user=alice)
    client.post(reverse("two_factor_setup"), {"code": totp_code(device)})
    assert other.get(reverse("timeline")).status_code == 302
    assert _signed_in(client)
    assert SignedInSession.objects.filter(owner=alice).count() == 1


# --- Signing in -------------------------------------------------------------------


def test_with_two_factor_on_the_password_alone_signs_nobody_in(alice, client):
    enrol(alice)
    response = _password_step(client)
    assert response.status_code == 302
    assert response["Location"] == reverse("login_verify")
    assert "_auth_user_id" not in client.session
    # No signed-in page, no session API, no way around the second step.
    assert client.get(reverse("timeline")).status_code == 302
    assert client.get(reverse("account_security")).status_code == 302
    assert client.get("/api/v1/memories/").status_code in (401, 403)


def test_the_apps_code_completes_the_sign_in_and_keeps_next(alice, client):
    device, _codes = enrol(alice)
    _password_step(client, next_url="/people/")
    response = client.post(
        reverse("login_verify"), {"code": totp_code(device, steps_ahead=1), "next": "/people/"}
    )
    assert response.status_code == 302 and response["Location"] == "/people/"
    assert _signed_in(client)
    record = SignedInSession.objects.get(owner=alice)
    assert record.method == "password and authenticator code"


def test_a_wrong_code_is_refused_and_says_so(alice, client):
    device, _codes = enrol(alice)
    _password_step(client)
    response = client.post(reverse("login_verify"), {"code": wrong_code(device)})
    assert response.status_code == 200
    assert "That code is not right" in response.content.decode()
    assert not _signed_in(client)


def test_a_code_is_never_accepted_twice(alice, client):
    device, _codes = enrol(alice)
    code = totp_code(device, steps_ahead=1)
    assert totp_verify(user=alice, code=code)
    assert not totp_verify(user=alice, code=code)
    _password_step(client)
    client.post(reverse("login_verify"), {"code": code})
    assert not _signed_in(client)


def test_the_enrolment_code_cannot_be_replayed_to_sign_in(alice, client):
    device = totp_enrolment_start(user=alice)
    code = totp_code(device)
    totp_enrolment_confirm(user=alice, code=code)
    _password_step(client)
    client.post(reverse("login_verify"), {"code": code})
    assert not _signed_in(client)


def test_wrong_codes_slow_the_app_but_a_recovery_code_still_signs_the_owner_in(alice, client):
    device, codes = enrol(alice)
    assert not totp_verify(user=alice, code=wrong_code(device))
    # Right away, even the right code waits out django-otp's throttle...
    assert not totp_verify(user=alice, code=totp_code(device, steps_ahead=1))
    # ...but someone who knows only the password cannot keep the owner out: recovery codes work.
    _password_step(client)
    response = client.post(reverse("login_verify"), {"code": codes[0]})
    assert response.status_code == 302
    assert _signed_in(client)
    device.refresh_from_db()
    assert device.throttling_failure_count == 0


def test_too_many_wrong_codes_end_the_pending_sign_in(alice, client):
    device, _codes = enrol(alice)
    _password_step(client)
    for _ in range(PENDING_MAX_FAILURES - 1):
        assert client.post(reverse("login_verify"), {"code": "nonsense-code"}).status_code == 200
    response = client.post(reverse("login_verify"), {"code": "nonsense-code"})
    assert response.status_code == 302 and response["Location"] == reverse("login")
    # The second step is gone: even a right code now needs the password first.
    response = client.post(reverse("login_verify"), {"code": totp_code(device, steps_ahead=1)})
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert not _signed_in(client)
    # The owner hears that someone has her password.
    [notice] = Notification.objects.filter(recipient=alice, kind="second_step_failed")
    assert "entered your password correctly" in notice.text
    assert notice.url == reverse("password_change")


def test_the_second_step_without_a_password_first_goes_back_to_log_in(alice, client):
    device, _codes = enrol(alice)
    response = client.post(reverse("login_verify"), {"code": totp_code(device, steps_ahead=1)})
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert not _signed_in(client)


def test_a_wrong_password_never_reaches_the_second_step(alice, client):
    enrol(alice)
    response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert client.get(reverse("login_verify")).status_code == 302


# --- Recovery codes ------------------------------------------------------------------


def test_each_recovery_code_works_once(alice, client):
    _device, codes = enrol(alice)
    _password_step(client)
    assert client.post(reverse("login_verify"), {"code": codes[3]}).status_code == 302
    client.post(reverse("logout"))
    _password_step(client)
    response = client.post(reverse("login_verify"), {"code": codes[3]})
    assert response.status_code == 200
    assert not _signed_in(client)
    assert RecoveryCode.objects.filter(owner=alice, used_at__isnull=False).count() == 1


def test_recovery_codes_are_read_loosely_spaces_dashes_and_capitals(alice):
    _device, codes = enrol(alice)
    assert recovery_code_use(user=alice, code=f"  {codes[0].upper().replace('-', ' ')} ")
    assert not recovery_code_use(user=alice, code=codes[0])


def test_another_accounts_recovery_code_is_refused(alice, mallory):
    _device, codes = enrol(alice)
    enrol(mallory)
    assert second_factor_verify(user=mallory, code=codes[0]) is None
    assert second_factor_verify(user=alice, code=codes[0]) == "password and recovery code"


def test_new_recovery_codes_void_the_old_ones(alice, alice_client):
    _device, codes = enrol(alice)
    response = alice_client.post(reverse("recovery_codes_regenerate"))
    assert response.status_code == 200
    fresh = response.context["codes"]
    assert set(fresh).isdisjoint(codes)
    assert not recovery_code_use(user=alice, code=codes[0])
    assert recovery_code_use(user=alice, code=fresh[0])
    assert alice_client.get(reverse("recovery_codes_regenerate")).status_code == 405


# --- Turning it off ------------------------------------------------------------------


def test_turning_off_needs_the_password_or_a_code(alice, alice_client):
    device, codes = enrol(alice)
    response = alice_client.post(reverse("two_factor_disable"), {"password": "wrong", "code": ""})
    assert response.status_code == 200 and two_factor_enabled(user=alice)
    response = alice_client.post(reverse("two_factor_disable"), {"password": "", "code": ""})
    assert response.status_code == 200 and two_factor_enabled(user=alice)
    response = alice_client.post(reverse("two_factor_disable"), {"password": PASSWORD})
    assert response.status_code == 302 and not two_factor_enabled(user=alice)
    assert not RecoveryCode.objects.filter(owner=alice).exists()


def test_turning_off_with_a_recovery_code(alice, alice_client):
    _device, codes = enrol(alice)
    response = alice_client.post(reverse("two_factor_disable"), {"code": codes[1]})
    assert response.status_code == 302 and not two_factor_enabled(user=alice)


def test_with_two_factor_off_again_the_password_signs_in(alice, client):
    enrol(alice)
    from accounts.two_factor import two_factor_disable

    two_factor_disable(user=alice)
    assert _password_step(client)["Location"] == reverse("timeline")
    assert _signed_in(client)


@pytest.mark.parametrize(
    "name", ["account_security", "two_factor_setup", "two_factor_disable", "session_list"]
)
def test_security_pages_need_a_signed_in_person(client, db, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("next_url", ["foo", "-1", "//evil.example/", "https://evil.example/x"])
def test_a_next_that_is_not_a_path_here_is_ignored_after_either_step(alice, client, next_url):
    assert _password_step(client, next_url=next_url)["Location"] == reverse("timeline")
    client.post(reverse("logout"))
    device, _codes = enrol(alice)
    _password_step(client, next_url=next_url)
    response = client.post(
        reverse("login_verify"), {"code": totp_code(device, steps_ahead=1), "next": next_url}
    )
    assert response.status_code == 302 and response["Location"] == reverse("timeline")


def test_the_admin_site_cannot_sign_a_staff_member_in_with_the_password_alone(alice, client):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    device, _codes = enrol(alice)
    response = client.post("/admin/login/?next=/admin/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == reverse("login") + "?next=%2Fadmin%2F"
    assert client.get("/admin/").status_code == 302
    assert "_auth_user_id" not in client.session
    # Through the real log-in, with both factors, the admin opens.
    _password_step(client, next_url="/admin/")
    response = client.post(
        reverse("login_verify"), {"code": totp_code(device, steps_ahead=1), "next": "/admin/"}
    )
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200
