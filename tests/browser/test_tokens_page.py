"""Settings → Access tokens in headless chromium, at 1280 and 390 px.

Alice makes an agent token for her Caregiver, copies it with the Copy button, an MCP
client uses it, the page shows when, and she revokes it after confirming — all under
the strict CSP, with screenshots in tests/artifacts/.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from playwright.sync_api import expect

from accounts.models import AccessToken
from accounts.services import user_signup
from tests.browser.test_circles import shoot
from tests.browser.test_csp import RECORD_VIOLATIONS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a sturdy passphrase"


def mcp_ping(base_url: str, token: str) -> int:
    request = urllib.request.Request(
        f"{base_url}/mcp/",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


def test_alice_makes_copies_sees_used_and_revokes_an_agent_token(live_server, browser_page, artifacts_dir):
    user_signup(username="alice", password=PASSWORD)
    page = browser_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.add_init_script(RECORD_VIOLATIONS)

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Log in')")
    page.click(".site-account a:has-text('Settings')")
    page.locator("#tokens").screenshot(path=str(artifacts_dir / "tokens_settings_card_1280.png"))
    page.click("a:has-text('Manage access tokens')")
    expect(page.locator("h1")).to_have_text("Access tokens")
    expect(page.locator(".site-account a[aria-current=page]")).to_have_text("Settings")
    expect(page.locator("#tokens-panel")).to_contain_text("No tokens yet")
    expect(page.locator("a:has-text('API documentation')")).to_have_attribute("href", "/api/docs/")

    page.fill("#id_name", "Claude Desktop")
    page.select_option("#id_acts_as", label="Caregiver — agent token")
    page.click("button:has-text('Create token')")
    notice = page.locator(".token-new")
    expect(notice).to_contain_text("Copy your new token now")
    expect(notice).to_contain_text("Acts as Caregiver")
    raw_token = page.input_value("#new-token")
    assert raw_token.startswith("ks_")
    page.click("button[data-copy-target='#new-token']")
    expect(notice.locator("button")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == raw_token
    row = page.locator(".tokens-table tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Claude Desktop")
    expect(row).to_contain_text("Never")
    shoot(page, artifacts_dir / "tokens_created_1280.png", width=1280)
    shoot(page, artifacts_dir / "tokens_created_390.png", width=390)

    assert mcp_ping(live_server.url, raw_token) == 200
    page.reload()  # the secret is not shown again; the use is
    expect(page.locator(".token-new")).to_have_count(0)
    assert raw_token not in page.content()
    token = AccessToken.objects.get(name="Claude Desktop")
    assert token.last_used_at is not None
    expect(row.locator("td[data-label='Last used']")).not_to_contain_text("Never")
    expect(row.locator("td[data-label='Last used'] time")).to_have_count(1)
    page.fill("#id_name", "Laptop scripts")
    page.select_option("#id_acts_as", value="owner")
    page.click("button:has-text('Create token')")
    expect(page.locator(".token-new")).to_contain_text("Acts as you")
    page.reload()
    expect(row).to_have_count(2)
    shoot(page, artifacts_dir / "tokens_list_1280.png", width=1280)
    shoot(page, artifacts_dir / "tokens_list_390.png", width=390)

    page.locator(".tokens-table tbody tr", has_text="Claude Desktop").locator("a:has-text('Revoke')").click()
    expect(page.locator("h1")).to_have_text("Revoke Claude Desktop?")
    shoot(page, artifacts_dir / "tokens_revoke_390.png", width=390)
    page.click("button:has-text('Revoke token')")
    expect(page.locator(".message")).to_contain_text("Revoked Claude Desktop")
    expect(row).to_have_count(1)
    expect(page.locator(".tokens-revoked summary")).to_have_text("Revoked tokens (1)")
    token.refresh_from_db()
    assert token.revoked_at is not None
    try:
        mcp_ping(live_server.url, raw_token)
    except urllib.error.HTTPError as refused:
        assert refused.code == 401
    else:
        raise AssertionError("a revoked token still worked")
    assert page.evaluate("window.__cspViolations") == []
