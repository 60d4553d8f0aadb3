"""Chat with the offline responder in headless chromium; revoked consent takes the memory out."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from accounts.services import user_signup
from memories.embeddings import embed_text
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_chat_cites_a_memory_until_its_person_revokes_consent(
    live_server, browser_page, artifacts_dir, settings
):
    settings.LLM_BASE_URL = ""  # the built-in offline responder
    alice = user_signup(username="alice", password="a sturdy passphrase")
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    tulips = memory_create(
        owner=alice,
        title="Tulips",
        body="Carol planted red tulips in the garden.",
        kind="knowledge",
        participants=[ParticipantSpec(person=carol, role="present")],
    )
    # Load the embedding model now: the first chat turn would otherwise spend the
    # browser's whole wait loading it.
    embed_text("warm up")
    page = browser_page
    base = live_server.url

    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "a sturdy passphrase")
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{base}/")

    # The agents page lists the built-ins; open the Caregiver's chat.
    page.click("nav >> text=Agents")
    expect(page.locator(".agent-card")).to_have_count(4)
    page.locator(".agent-card", has_text="Caregiver").locator("a", has_text="Chat").click()
    expect(page.locator("h1")).to_have_text("Caregiver")

    # Ask: the reply arrives in place (htmx), from the offline responder, citing the memory.
    page.fill("#id_message", "Who planted the tulips?")
    page.click("button:has-text('Send')")
    reply = page.locator(".chat-assistant").last
    expect(reply).to_contain_text("not a language model", timeout=60_000)
    expect(reply).to_contain_text("Carol planted red tulips")
    cited = reply.locator("a.cited-memory")
    expect(cited).to_have_count(1)
    expect(cited).to_have_attribute("href", reverse("memory_detail", args=[tulips.pk]))
    expect(page.locator("#id_message")).to_have_value("")
    # The new conversation got its own address and appears in the list.
    expect(page).to_have_url(re.compile(r"/agents/[0-9a-f-]{36}/chat/[0-9a-f-]{36}/$"))
    expect(page.locator("#conversation-list")).to_contain_text("Who planted the tulips?")
    chat_url = page.url
    artifacts_dir.joinpath("agent-chat.png").write_bytes(page.screenshot(full_page=True))

    # The cited link leads to the memory, which now shows who has seen it.
    cited.click()
    expect(page.locator("#access-log")).to_contain_text("Caregiver")

    # Carol revokes consent (recorded by the owner on Carol's page).
    page.locator("a", has_text="Carol").first.click()
    page.check("input[name=status][value=revoked]")
    page.click("button:has-text('Update consent')")
    expect(page.locator("#consent-panel .consent-now .badge")).to_have_text("Revoked")

    # Same question, same conversation: the memory is gone from the reply.
    page.goto(chat_url)
    page.fill("#id_message", "Who planted the tulips?")
    page.click("button:has-text('Send')")
    expect(page.locator(".chat-assistant")).to_have_count(2)
    second = page.locator(".chat-assistant").last
    expect(second).to_contain_text("found no memories this agent may use")
    expect(second).not_to_contain_text("Carol planted red tulips")
    expect(second.locator("a.cited-memory")).to_have_count(0)
    artifacts_dir.joinpath("agent-chat-revoked.png").write_bytes(page.screenshot(full_page=True))
