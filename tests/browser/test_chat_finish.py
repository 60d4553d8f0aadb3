"""The agent chat in chromium at 1280 and 390 px: Markdown, linked citations, typing, Enter, retry, delete."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from accounts.services import user_signup
from agents.models import AccessLog, Agent, Conversation
from memories.embeddings import embed_text
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent
from tests.agents.conftest import llm_stub  # noqa: F401 - the local OpenAI-compatible stub

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [1280, 390])
def test_chat_markdown_citations_retry_and_delete(
    live_server,
    browser_page,
    artifacts_dir,
    llm_stub,  # noqa: F811
    width,
):
    alice = user_signup(username="alice", password="a sturdy passphrase")
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    tulips = memory_create(
        owner=alice,
        title="Tulips",
        body="Carol planted red tulips in the garden.",
        participants=[ParticipantSpec(person=carol, role="present")],
    )
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")
    embed_text("warm up")
    llm_stub.reply = (
        "**Carol** planted them [1].\n\n- red tulips\n- in the garden\n\n<script>alert(1)</script>"
    )
    llm_stub.delay = 1.5  # long enough to see the question and the typing line

    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    base = live_server.url
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "a sturdy passphrase")
    page.click("button[type=submit]")
    page.goto(base + reverse("agent_chat", args=[caregiver.pk]))

    # Shift+Enter starts a new line and sends nothing.
    box = page.locator("#id_message")
    box.click()
    box.type("Who planted")
    box.press("Shift+Enter")
    box.type("the tulips?")
    assert box.input_value() == "Who planted\nthe tulips?"
    assert llm_stub.requests == []

    # Enter sends: the question shows at once, with the agent typing, before the reply.
    box.press("Enter")
    pending = page.locator(".chat-pending")
    expect(pending).to_contain_text("Who planted")
    expect(page.locator(".chat-typing")).to_contain_text("Caregiver")
    artifacts_dir.joinpath(f"chat-typing-{width}.png").write_bytes(page.screenshot(full_page=True))
    reply = page.locator(".chat-assistant:not(.chat-typing)").last
    expect(reply.locator("strong")).to_have_text("Carol", timeout=30_000)
    expect(reply.locator(".chat-markdown li")).to_have_count(2)
    expect(page.locator(".chat-typing, .chat-pending")).to_have_count(0)
    citation = reply.locator("a.citation")
    expect(citation).to_have_text("[1]")
    expect(citation).to_have_attribute("href", reverse("memory_detail", args=[tulips.pk]))
    expect(reply.locator(".cited-memory")).to_contain_text("[1] Tulips")
    expect(reply).to_contain_text("<script>alert(1)</script>")  # shown as text, never run
    assert dialogs == []
    expect(box).to_have_value("")
    expect(page).to_have_url(re.compile(r"/chat/[0-9a-f-]{36}/$"))
    artifacts_dir.joinpath(f"chat-markdown-{width}.png").write_bytes(page.screenshot(full_page=True))

    # The model fails: the reply says so, the question stays in the box, and Retry asks again.
    llm_stub.status = 500
    llm_stub.delay = 0
    box.fill("And when?")
    page.click("button:has-text('Send')")
    failed = page.locator(".chat-error").last
    expect(failed).to_contain_text("Not answered", timeout=30_000)
    expect(box).to_have_value("And when?")
    retry = failed.locator("button:has-text('Retry')")
    expect(retry).to_be_visible()
    artifacts_dir.joinpath(f"chat-error-{width}.png").write_bytes(page.screenshot(full_page=True))
    llm_stub.status = 200
    llm_stub.reply = "In spring [1]."
    retry.click()
    expect(page.locator(".chat-assistant").last).to_contain_text("In spring", timeout=30_000)
    expect(page.locator(".chat-error")).to_have_count(0)
    expect(page.locator(".chat-user", has_text="And when?")).to_have_count(1)
    expect(box).to_have_value("")

    # Delete the conversation after a confirmation; the access log keeps who saw what.
    logged = AccessLog.objects.filter(owner=alice).count()
    assert logged >= 1  # the tulips, handed over for the first question
    page.locator("#conversation-list .conversation-delete").first.click()
    expect(page.locator("h1")).to_contain_text("Delete")
    artifacts_dir.joinpath(f"chat-delete-confirm-{width}.png").write_bytes(page.screenshot(full_page=True))
    page.click("button:has-text('Delete conversation')")
    expect(page.locator(".message-success")).to_contain_text("Deleted the conversation")
    assert not Conversation.objects.filter(owner=alice).exists()
    assert AccessLog.objects.filter(owner=alice).count() == logged
    expect(page.locator("#conversation-list")).to_contain_text("No conversations yet.")
