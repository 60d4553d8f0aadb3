"""Chromium enforces the Content-Security-Policy: every main page loads without a
violation, and the features that used inline code still work from static files."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from accounts.services import user_signup
from agents.services import agent_create
from circles.services import circle_create
from memories.embeddings import embed_text
from memories.services import memory_create
from people.services import person_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Runs before any page script; CDP-injected, so the CSP does not apply to it.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


def test_pages_run_under_the_policy_without_violations(live_server, browser_page, settings):
    settings.LLM_BASE_URL = ""  # the built-in offline responder
    alice = user_signup(username="alice", password="a sturdy passphrase")
    bob = person_create(owner=alice, display_name="Bob")
    memory = memory_create(owner=alice, title="River", body="Walked by the river.")
    circle = circle_create(owner=alice, name="Family")
    agent = agent_create(owner=alice, name="Helper", instructions="Be brief.")
    # Search and chat would otherwise spend the browser's whole wait loading the model.
    embed_text("warm up")
    page = browser_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.add_init_script(RECORD_VIOLATIONS)
    console_messages: list[str] = []
    page.on("console", lambda message: console_messages.append(message.text))
    base = live_server.url

    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "a sturdy passphrase")
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{base}/")

    for url in [
        reverse("timeline"),
        reverse("memory_detail", args=[memory.pk]),
        reverse("person_list"),
        reverse("person_detail", args=[bob.pk]),
        reverse("circle_list"),
        reverse("circle_detail", args=[circle.pk]),
        reverse("agent_list"),
        reverse("memory_search") + "?q=river",
        reverse("settings"),
        reverse("inbox"),
        reverse("my_consents"),
        reverse("universe"),
    ]:
        page.goto(base + url)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__cspViolations") == [], url

    # The invite link's copy button (was hx-on:click) works from static/js/copy.js.
    page.goto(base + reverse("circle_detail", args=[circle.pk]))
    page.locator(".invite-form button[type=submit]").click()
    copy = page.locator("button[data-copy-target='#new-invite-url']")
    copy.click()
    expect(copy).to_have_text(re.compile("Copied|Select and copy"))

    # The chat form empties after a reply arrives (was hx-on::after-request).
    page.goto(base + reverse("agent_chat", args=[agent.pk]))
    page.fill("#id_message", "What happened by the river?")
    page.click("button:has-text('Send')")
    expect(page.locator(".chat-assistant").last).to_be_visible(timeout=60_000)
    expect(page.locator("#id_message")).to_have_value("")
    # The typing line static/js/chat.js showed while waiting is gone once the reply is in.
    expect(page.locator(".chat-typing")).to_have_count(0)
    assert page.evaluate("window.__cspViolations") == []

    # Swagger UI renders from the sidecar's static files and a script URL.
    page.goto(base + reverse("api-docs"))
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Keepsake API", timeout=30_000)
    assert page.evaluate("window.__cspViolations") == []
    assert [text for text in console_messages if "Content Security Policy" in text] == []
