"""Two-factor sign-in, recovery codes, passkeys and the Sessions page in headless chromium.

Alice turns on two-factor sign-in by scanning nothing: the test reads the secret the page
shows and computes the app's codes from it (RFC 6238, django-otp's oath module). Passkeys
run against Chromium's virtual authenticator over the DevTools protocol (WebAuthn domain):
a real navigator.credentials.create() and .get(), signed by the browser and checked by the
server. The live server is http://localhost:<port>, a secure context, so WebAuthn works
without TLS; the relying party id is the host name, "localhost".

Screenshots at 1280 and 390 px land in tests/artifacts/.
"""

from __future__ import annotations

import time
from base64 import b32decode

import pytest
from django_otp.oath import TOTP
from playwright.sync_api import Page, expect

from accounts.models import Passkey, SignedInSession
from accounts.services import user_signup
from inbox.models import Notification
from tests.browser.test_accessibility import axe_page  # noqa: F401 (a fixture)
from tests.browser.test_circles import shoot
from tests.browser.test_csp import RECORD_VIOLATIONS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a sturdy passphrase"
PHONE = 390
DESKTOP = 1280


def app_code(secret_text: str, *, steps_ahead: int = 0) -> str:
    """What an authenticator app that scanned this secret shows (now, or a step or two later)."""
    secret = secret_text.replace(" ", "")
    key = b32decode(secret + "=" * (-len(secret) % 8))
    totp = TOTP(key)
    totp.time = time.time() + 30 * steps_ahead
    return f"{totp.token():06d}"


def log_in(page: Page, base_url: str, username: str = "alice") -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")


def no_csp_violations(page: Page) -> None:
    assert page.evaluate("window.__cspViolations") == [], page.url


def test_alice_turns_on_two_factor_signs_in_with_a_code_and_with_a_recovery_code(
    live_server, browser_page, artifacts_dir
):
    user_signup(username="alice", password=PASSWORD)
    page = browser_page
    page.add_init_script(RECORD_VIOLATIONS)
    log_in(page, live_server.url)
    expect(page).to_have_url(f"{live_server.url}/")

    page.goto(f"{live_server.url}/accounts/security/")
    expect(page.locator("h1")).to_have_text("Sign-in and security")
    expect(page.locator(".site-account a[aria-current=page]")).to_have_text("Settings")
    expect(page.locator("#two-factor")).to_contain_text("Off")
    shoot(page, artifacts_dir / "security_off_1280.png", width=DESKTOP)
    shoot(page, artifacts_dir / "security_off_390.png", width=PHONE)
    page.click("a:has-text('Set up two-factor sign-in')")

    expect(page.locator("svg.totp-qr")).to_be_visible()
    secret = page.locator("#totp-secret").inner_text()
    shoot(page, artifacts_dir / "two_factor_setup_1280.png", width=DESKTOP)
    shoot(page, artifacts_dir / "two_factor_setup_390.png", width=PHONE)
    no_csp_violations(page)
    page.fill("#id_code", "000000" if app_code(secret) != "000000" else "111111")
    page.click("button:has-text('Turn on two-factor sign-in')")
    expect(page.locator(".field .error")).to_contain_text("That code does not match")
    # django-otp slows the next try after a wrong code by a second.
    page.wait_for_timeout(1100)
    page.fill("#id_code", app_code(secret))
    page.click("button:has-text('Turn on two-factor sign-in')")

    expect(page.locator("h1")).to_have_text("Your recovery codes")
    codes = page.locator("#recovery-codes code").all_inner_texts()
    assert len(codes) == 10
    shoot(page, artifacts_dir / "recovery_codes_1280.png", width=DESKTOP)
    shoot(page, artifacts_dir / "recovery_codes_390.png", width=PHONE)
    no_csp_violations(page)
    page.click("a:has-text('I have saved them')")
    expect(page.locator("#two-factor")).to_contain_text("On")
    expect(page.locator("#two-factor")).to_contain_text("10 of 10")
    assert codes[0] not in page.content()

    # Signing in now takes the password and then a code.
    page.click("button:has-text('Log out')")
    log_in(page, live_server.url)
    expect(page.locator("h1")).to_have_text("One more step")
    page.goto(f"{live_server.url}/people/")
    expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/people/")
    log_in(page, live_server.url)
    expect(page.locator("h1")).to_have_text("One more step")
    shoot(page, artifacts_dir / "login_second_step_1280.png", width=DESKTOP)
    shoot(page, artifacts_dir / "login_second_step_390.png", width=PHONE)
    page.fill("#id_code", app_code(secret, steps_ahead=1))
    page.click("button:has-text('Verify and sign in')")
    expect(page).to_have_url(f"{live_server.url}/")
    no_csp_violations(page)

    # The same code again (someone who saw it over her shoulder) does not work.
    used = app_code(secret, steps_ahead=1)
    page.click("button:has-text('Log out')")
    log_in(page, live_server.url)
    page.fill("#id_code", used)
    page.click("button:has-text('Verify and sign in')")
    expect(page.locator(".field .error")).to_contain_text("not right, or it was used already")

    # Her phone is lost: a recovery code signs her in, once.
    page.fill("#id_code", codes[0])
    page.click("button:has-text('Verify and sign in')")
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator(".message")).to_contain_text("You used a recovery code; 9 left")
    page.click("button:has-text('Log out')")
    log_in(page, live_server.url)
    page.fill("#id_code", codes[0])
    page.click("button:has-text('Verify and sign in')")
    expect(page.locator(".field .error")).to_be_visible()
    page.fill("#id_code", codes[1])
    page.click("button:has-text('Verify and sign in')")
    expect(page).to_have_url(f"{live_server.url}/")

    page.goto(f"{live_server.url}/accounts/security/")
    expect(page.locator("#two-factor")).to_contain_text("8 of 10")
    shoot(page, artifacts_dir / "security_on_1280.png", width=DESKTOP)
    shoot(page, artifacts_dir / "security_on_390.png", width=PHONE)
    no_csp_violations(page)


def _virtual_authenticator(page: Page):
    """Chromium's built-in authenticator: a platform passkey store that verifies its user."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable")
    added = cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return cdp, added["authenticatorId"]


def test_alice_adds_a_passkey_and_signs_in_with_it_without_a_username(
    live_server, browser_page, artifacts_dir
):
    assert live_server.url.startswith("http://localhost:"), "WebAuthn needs a secure context"
    alice = user_signup(username="alice", password=PASSWORD)
    page = browser_page
    page.add_init_script(RECORD_VIOLATIONS)
    cdp, authenticator = _virtual_authenticator(page)
    log_in(page, live_server.url)
    page.goto(f"{live_server.url}/accounts/security/")
    expect(page.locator("#passkeys")).to_contain_text("No passkeys yet")

    # A name is asked for before the browser is.
    add = page.locator("[data-passkey-add-button]")
    expect(add).to_be_enabled()
    add.click()
    expect(page.locator("#passkeys [data-passkey-status]")).to_contain_text("Give the passkey a name first")

    page.fill("#passkey-name", "Work laptop")
    add.click()
    expect(page.locator(".message")).to_contain_text("Passkey “Work laptop” added")
    expect(page.locator(".passkey-item")).to_have_count(1)
    expect(page.locator(".passkey-item")).to_contain_text("not used yet")
    shoot(page, artifacts_dir / "security_passkey_1280.png", width=DESKTOP)
    shoot(page, artifacts_dir / "security_passkey_390.png", width=PHONE)
    no_csp_violations(page)
    credentials = cdp.send("WebAuthn.getCredentials", {"authenticatorId": authenticator})["credentials"]
    assert len(credentials) == 1 and credentials[0]["isResidentCredential"] is True
    assert credentials[0]["rpId"] == "localhost"
    passkey = Passkey.objects.get(owner=alice)
    assert passkey.name == "Work laptop"
    assert bytes(passkey.credential_id) == _b64url_bytes(credentials[0]["credentialId"])

    # Adding the same authenticator twice is refused by the browser (excludeCredentials).
    page.fill("#passkey-name", "Again")
    add.click()
    expect(page.locator("#passkeys [data-passkey-status]")).to_contain_text("already has a passkey")
    assert Passkey.objects.filter(owner=alice).count() == 1

    # Signing in: no username, no password.
    page.click("button:has-text('Log out')")
    expect(page.locator("[data-passkey-sign-in]")).to_be_visible()
    shoot(page, artifacts_dir / "login_passkey_1280.png", width=DESKTOP)
    shoot(page, artifacts_dir / "login_passkey_390.png", width=PHONE)
    page.click("button:has-text('Sign in with a passkey')")
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator(".site-account .who")).to_have_text("alice")
    no_csp_violations(page)
    record = SignedInSession.objects.get(owner=alice)
    assert record.method == "passkey"
    passkey.refresh_from_db()
    assert passkey.last_used_at is not None

    # Deleted, it no longer signs anyone in.
    page.goto(f"{live_server.url}/accounts/security/")
    page.click(".passkey-item a:has-text('Delete')")
    page.click("button:has-text('Delete passkey')")
    expect(page.locator("#passkeys")).to_contain_text("No passkeys yet")
    page.click("button:has-text('Log out')")
    page.click("button:has-text('Sign in with a passkey')")
    expect(page.locator("[data-passkey-sign-in] [data-passkey-status]")).to_contain_text(
        "not registered here"
    )
    expect(page).to_have_url(f"{live_server.url}/accounts/login/")


def test_a_passkey_is_the_second_step_too(live_server, browser_page):
    from tests.accounts.two_factor_helpers import enrol

    alice = user_signup(username="alice", password=PASSWORD)
    enrol(alice)
    page = browser_page
    cdp, _authenticator = _virtual_authenticator(page)
    # Sign in once with the password and a recovery code, to add a passkey.
    from accounts.two_factor import recovery_codes_generate

    codes = recovery_codes_generate(user=alice)
    log_in(page, live_server.url)
    page.fill("#id_code", codes[0])
    page.click("button:has-text('Verify and sign in')")
    page.goto(f"{live_server.url}/accounts/security/")
    page.fill("#passkey-name", "Phone")
    page.click("[data-passkey-add-button]")
    expect(page.locator(".passkey-item")).to_have_count(1)
    page.click("button:has-text('Log out')")

    log_in(page, live_server.url)
    expect(page.locator("h1")).to_have_text("One more step")
    page.click("button:has-text('Sign in with a passkey')")
    expect(page).to_have_url(f"{live_server.url}/")
    assert SignedInSession.objects.get(owner=alice).method == "passkey"


def _b64url_bytes(value: str) -> bytes:
    from base64 import b64decode

    return b64decode(value + "=" * (-len(value) % 4))


def test_sessions_page_signs_the_other_browser_out(live_server, new_person_page, artifacts_dir):
    alice = user_signup(username="alice", password=PASSWORD)
    laptop, phone = new_person_page(), new_person_page()
    for page in (laptop, phone):
        page.add_init_script(RECORD_VIOLATIONS)
    log_in(laptop, live_server.url)
    expect(laptop).to_have_url(f"{live_server.url}/")
    log_in(phone, live_server.url)
    expect(phone).to_have_url(f"{live_server.url}/")

    # The second browser is new to her account: a notice in her inbox says where and when.
    notices = Notification.objects.filter(recipient=alice, kind="new_sign_in")
    assert notices.count() == 2
    laptop.goto(f"{live_server.url}/inbox/")
    expect(laptop.locator("#main")).to_contain_text("New sign-in from Chrome on Linux at 127.0.0.1")

    laptop.goto(f"{live_server.url}/accounts/sessions/")
    expect(laptop.locator(".session-item")).to_have_count(2)
    expect(laptop.locator(".session-current")).to_contain_text("This browser")
    expect(laptop.locator(".session-item").nth(1)).to_contain_text("Chrome on Linux")
    expect(laptop.locator(".session-item").nth(1)).to_contain_text("127.0.0.1")
    shoot(laptop, artifacts_dir / "sessions_1280.png", width=DESKTOP)
    shoot(laptop, artifacts_dir / "sessions_390.png", width=PHONE)
    no_csp_violations(laptop)

    laptop.click("button:has-text('Sign out everywhere else')")
    expect(laptop.locator(".message")).to_contain_text("Signed out 1 other browser")
    expect(laptop.locator(".session-item")).to_have_count(1)
    expect(laptop.locator("#main")).to_contain_text("You are not signed in anywhere else")
    shoot(laptop, artifacts_dir / "sessions_alone_390.png", width=PHONE)

    phone.reload()
    expect(phone).to_have_url(f"{live_server.url}/accounts/login/?next=/")
    laptop.goto(f"{live_server.url}/people/")
    expect(laptop).to_have_url(f"{live_server.url}/people/")
    assert SignedInSession.objects.filter(owner=alice).count() == 1


def test_security_pages_have_no_serious_accessibility_violations(live_server, axe_page):  # noqa: F811
    """axe-core, as tests/browser/test_accessibility.py runs it, on each page of this feature."""
    from tests.browser.test_accessibility import WIDTHS, blocking_violations, duplicate_ids

    alice = user_signup(username="alice", password=PASSWORD)
    page = axe_page
    base = live_server.url
    failures: dict[str, list] = {}

    def check(name: str) -> None:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            if found := blocking_violations(page):
                failures[f"{name}@{width}"] = found
        if duplicated := duplicate_ids(page):
            failures[f"{name} ids"] = duplicated
        page.set_viewport_size({"width": DESKTOP, "height": 900})

    log_in(page, base)
    pages = {
        "security": "/accounts/security/",
        "sessions": "/accounts/sessions/",
        "two_factor_setup": "/accounts/security/two-factor/",
    }
    for name, path in pages.items():
        page.goto(f"{base}{path}")
        check(name)
    secret = page.locator("#totp-secret").inner_text()
    page.fill("#id_code", app_code(secret))
    page.click("button:has-text('Turn on two-factor sign-in')")
    expect(page.locator("h1")).to_have_text("Your recovery codes")
    check("recovery_codes")
    page.goto(f"{base}/accounts/security/two-factor/off/")
    check("two_factor_disable")
    page.click("button:has-text('Log out')")
    log_in(page, base)
    expect(page.locator("h1")).to_have_text("One more step")
    check("login_verify")
    assert failures == {}
    assert alice.totpdevice_set.filter(confirmed=True).exists()
