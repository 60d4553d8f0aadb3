"""Linked people in headless chromium, one browser context per person.

Alice keeps a journal with a memory about Bob and invites him to link his own
account; from then on Bob decides: while he grants "alice's agents" her Caregiver
answers from the memory, the moment he revokes it no longer does, and Alice's page
for Bob says he decides and offers her no way to grant for him.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from playwright.sync_api import Locator, Page, expect

from memories.embeddings import embed_text
from memories.models import Memory
from tests.browser.test_circles import shoot, sign_up

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MEMORY_BODY = "Bob taught me chess in the park."
QUESTION = "Who taught me chess?"


def agents_card(page: Page) -> Locator:
    """On My consents: the card for alice's agents (the `agents` audience of her journal)."""
    return page.locator(
        "#my-consents .audience-card", has=page.locator(".audience-title", has_text="alice's agents")
    )


def decide(page: Page, status: str, label: str, reason: str) -> None:
    """Bob's own switch for alice's agents: pick, give a reason, save, and wait for the badge."""
    card = agents_card(page)
    card.locator(f"input[name=status][value={status}]").check()
    card.locator("textarea[name=reason], input[name=reason]").fill(reason)
    card.locator('button:has-text("Save for alice\'s agents")').click()
    expect(page.locator(".linked-person .saved[role=status]")).to_contain_text(f"alice's agents: {status}.")
    expect(agents_card(page).locator(".consent-now .badge")).to_have_text(label)
    expect(agents_card(page).locator(".consent-now")).to_contain_text("by you")


def ask(page: Page, chat_url: str, *, replies_before: int) -> Locator:
    """Ask the Caregiver the chess question in the page's conversation; the new reply."""
    page.goto(chat_url)
    page.fill("#id_message", QUESTION)
    page.click("button:has-text('Send')")
    expect(page.locator(".chat-assistant")).to_have_count(replies_before + 1, timeout=60_000)
    reply = page.locator(".chat-assistant").last
    expect(reply).to_contain_text("not a language model")
    return reply


def test_bob_links_his_account_and_alone_decides_whether_alices_agents_use_his_memory(
    live_server, new_person_page, artifacts_dir, settings
):
    settings.LLM_BASE_URL = ""  # the built-in offline responder, which cites what it used
    # Load the embedding model now: the first chat turn would otherwise spend the
    # browser's whole wait loading it.
    embed_text("warm up")
    base = live_server.url
    alice = new_person_page()
    bob = new_person_page()

    # Alice signs up, adds Bob (pending, like everyone new) and a memory with him.
    alice.goto(f"{base}/accounts/signup/")
    sign_up(alice, "alice")
    expect(alice).to_have_url(f"{base}/")
    alice.click("nav >> text=People")
    alice.fill("#id_display_name", "Bob")
    alice.click("button:has-text('Add person')")
    expect(alice.locator("h1")).to_contain_text("Bob")
    expect(alice.locator("#audience-agents .consent-now .badge")).to_have_text("Pending")
    bob_person_url = alice.url

    # And a circle, so that Bob has a second audience to decide about.
    alice.click("nav >> text=Circles")
    alice.fill("#id_name", "Family")
    alice.click("button:has-text('Create circle')")
    expect(alice.locator("h1")).to_have_text("Family")

    alice.click("nav >> text=Timeline")
    alice.fill("#id_body", MEMORY_BODY)
    alice.click("summary:has-text('More')")
    alice.fill("#id_title", "Chess with Bob")
    alice.select_option("#id_people-0-person", label="Bob")
    alice.select_option("#id_people-0-role", "present")
    alice.click("button:has-text('Save memory')")
    expect(alice.locator(".memory-card", has_text="Chess with Bob")).to_be_visible()
    chess = Memory.objects.get(title="Chess with Bob")

    # From Bob's page she makes a link invitation: shown once, in place.
    alice.goto(bob_person_url)
    link_panel = alice.locator("#link-panel")
    expect(link_panel).to_contain_text("Bob's own account")
    link_panel.locator("button:has-text('Invite Bob to link their account')").click()
    link_field = alice.locator("#new-link-url")
    expect(link_field).to_have_value(re.compile(r"/links/[^/]+/$"))
    expect(link_panel).to_contain_text("it is shown only once")
    link_url = link_field.input_value()
    alice.reload()
    expect(alice.locator("#new-link-url")).to_have_count(0)  # once means once
    expect(alice.locator("#link-panel .invite-row")).to_have_count(1)

    # Bob opens it signed out, signs up from it, comes straight back and accepts.
    bob.goto(link_url)
    expect(bob.locator("h1")).to_have_text("alice invites you to decide for yourself")
    bob.click("#link-card >> text=Sign up")
    sign_up(bob, "bob")
    expect(bob).to_have_url(link_url)
    expect(bob.locator("#link-card")).to_contain_text("alice will see your username (bob)")
    bob.click("button:has-text('Accept and link my account')")
    expect(bob).to_have_url(re.compile(r"/me/consents/#linked-[0-9a-f-]{36}$"))
    expect(bob.locator(".message")).to_contain_text(
        "You now decide who may see memories about you in alice's journal"
    )
    expect(bob.locator("#my-consents .journal h2")).to_have_text("alice's journal")
    expect(bob.locator(".linked-person h3")).to_have_text("You, as “Bob”")
    expect(agents_card(bob).locator(".consent-now .badge")).to_have_text("Pending")
    expect(agents_card(bob).locator(".memory-count")).to_contain_text("You are in 1 of alice's memories.")
    family = bob.locator("#my-consents .audience-card", has=bob.locator(".audience-title", has_text="Family"))
    expect(family.locator(".audience-kind")).to_have_text("circle")
    expect(family.locator(".consent-now .badge")).to_have_text("Pending")
    expect(bob.locator("body")).not_to_contain_text(MEMORY_BODY)  # counts, never the memory

    # Bob grants alice's agents, on his own page.
    decide(bob, "granted", "Granted", "Happy for alice's helpers to remember our chess games.")
    expect(agents_card(bob).locator(".reason-now")).to_contain_text("remember our chess games")
    shoot(bob, artifacts_dir / "my_consents_1280.png", width=1280)
    shoot(bob, artifacts_dir / "my_consents_390.png", width=390)

    # Alice's Caregiver now answers from the memory and cites it.
    alice.goto(f"{base}/")
    alice.click("nav >> text=Agents")
    alice.locator(".agent-card", has_text="Caregiver").locator("a", has_text="Chat").click()
    expect(alice.locator("h1")).to_have_text("Caregiver")
    chat_url = alice.url
    first = ask(alice, chat_url, replies_before=0)
    expect(first).to_contain_text(MEMORY_BODY.rstrip("."))
    cited = first.locator("a.cited-memory")
    expect(cited).to_have_count(1)
    expect(cited).to_have_attribute("href", reverse("memory_detail", args=[chess.pk]))
    expect(alice).to_have_url(re.compile(r"/agents/[0-9a-f-]{36}/chat/[0-9a-f-]{36}/$"))
    chat_url = alice.url

    # Bob changes his mind: revoked, by him.
    bob.goto(f"{base}/me/consents/")
    decide(bob, "revoked", "Revoked", "I'd rather keep chess between us.")
    shoot(bob, artifacts_dir / "my_consents_revoked_1280.png", width=1280)
    shoot(bob, artifacts_dir / "my_consents_revoked_390.png", width=390)

    # Same question, same conversation: the memory is no longer used.
    second = ask(alice, chat_url, replies_before=1)
    expect(second).to_contain_text("found no memories this agent may use")
    expect(second).not_to_contain_text(MEMORY_BODY.rstrip("."))
    expect(second.locator("a.cited-memory")).to_have_count(0)

    # Alice's page for Bob: linked, he decides, and she has no Grant to offer.
    alice.goto(bob_person_url)
    expect(alice.locator("#link-panel .linked-to")).to_contain_text("Linked to bob")
    expect(alice.locator("#link-panel .linked-to")).to_contain_text("Bob decides their own consent")
    agents_switch = alice.locator("#audience-agents")
    expect(agents_switch.locator(".consent-now .badge")).to_have_text("Revoked")
    expect(agents_switch.locator(".linked-decides")).to_contain_text("only they can grant it")
    expect(agents_switch.locator("input[name=status][value=granted]")).to_have_count(0)
    expect(agents_switch.locator("input[name=status][value=revoked]")).to_have_count(1)
    expect(agents_switch.locator("input[name=status][value=pending]")).to_have_count(1)
    family_switch = alice.locator(
        "#consent-panel .audience", has=alice.locator(".audience-title", has_text="Family")
    )
    expect(family_switch.locator(".linked-decides")).to_contain_text(
        "Bob decides their own consent for Family"
    )
    expect(family_switch.locator("input[name=status]")).to_have_count(2)
    expect(alice.locator("#consent-panel input[name=status][value=granted]")).to_have_count(0)
    expect(alice.locator("#consent-panel .history")).to_contain_text("by bob")
    shoot(alice, artifacts_dir / "person_linked_1280.png", width=1280)
    shoot(alice, artifacts_dir / "person_linked_390.png", width=390)
