"""One journey through the real pages in headless chromium: the consent badge lives and goes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_signup_add_person_and_memory_then_granting_consent_clears_the_badge(
    live_server, browser_page, artifacts_dir
):
    page = browser_page
    base = live_server.url

    # Sign up: lands on the (empty) timeline, logged in.
    page.goto(f"{base}/accounts/signup/")
    page.fill("#id_username", "alice")
    page.fill("#id_password1", "a sturdy passphrase")
    page.fill("#id_password2", "a sturdy passphrase")
    page.click("button:has-text('Create account')")
    expect(page).to_have_url(f"{base}/")
    expect(page.locator(".message")).to_contain_text("Your journal is ready")

    # Add a person on the People page: they start pending.
    page.click("nav >> text=People")
    page.fill("#id_display_name", "Bob")
    page.fill("#id_aliases", "Bobby")
    page.click("button:has-text('Add person')")
    expect(page.locator("h1")).to_contain_text("Bob")
    expect(page.locator("#consent-panel .consent-now .badge")).to_have_text("Pending")
    artifacts_dir.joinpath("person.png").write_bytes(page.screenshot(full_page=True))

    # Add a memory with Bob from the timeline's quick-add form (htmx, in place).
    page.click("nav >> text=Timeline")
    # An empty memory is refused in place, with the error shown and nothing saved.
    page.click("summary:has-text('More')")
    page.select_option("#id_people-0-person", label="Bob")
    page.click("button:has-text('Save memory')")
    expect(page.locator("#quick-add")).to_contain_text("Write something: a memory needs a body.")
    expect(page.locator(".memory-card")).to_have_count(0)
    artifacts_dir.joinpath("quick-add-error.png").write_bytes(page.screenshot(full_page=True))
    # More people than the three blank rows: another row arrives over htmx.
    page.click("button:has-text('Add another person')")
    expect(page.locator("#id_people-3-person")).to_be_visible()
    expect(page.locator("#id_people-TOTAL_FORMS")).to_have_value("4")
    page.fill("#id_body", "Bob taught me to play chess in the park.")
    page.fill("#id_title", "Chess lesson")
    page.select_option("#id_people-0-person", label="Bob")
    page.select_option("#id_people-0-role", "present")
    page.click("button:has-text('Save memory')")
    card = page.locator(".memory-card", has_text="Chess lesson")
    expect(card).to_be_visible()
    expect(card.locator(".agent-badge")).to_contain_text("Hidden from agents: Bob (pending)")
    # The form was reset for the next memory.
    expect(page.locator("#id_body")).to_have_value("")
    artifacts_dir.joinpath("timeline-hidden.png").write_bytes(page.screenshot(full_page=True))

    # The badge is still there after a full reload (it is not client-side state).
    page.reload()
    expect(page.locator(".memory-card", has_text="Chess lesson").locator(".agent-badge")).to_contain_text(
        "Hidden from agents: Bob (pending)"
    )

    # Grant consent on Bob's page: the panel updates in place and records the change.
    page.locator(".memory-card", has_text="Chess lesson").locator("a.chip", has_text="Bob").click()
    expect(page.locator("h1")).to_contain_text("Bob")
    page.check("input[name=status][value=granted]")
    page.fill("#id_reason", "He said yes over coffee")
    page.click("button:has-text('Update consent')")
    expect(page.locator("#consent-panel .consent-now .badge")).to_have_text("Granted")
    expect(page.locator("#consent-panel .history")).to_contain_text("He said yes over coffee")
    expect(page.locator("#person-memories .memory-card", has_text="Chess lesson")).to_be_visible()
    expect(page.locator("#person-memories .agent-badge")).to_have_count(0)
    artifacts_dir.joinpath("person-granted.png").write_bytes(page.screenshot(full_page=True))

    # Back on the timeline the badge is gone.
    page.click("nav >> text=Timeline")
    card = page.locator(".memory-card", has_text="Chess lesson")
    expect(card).to_be_visible()
    expect(card.locator(".agent-badge")).to_have_count(0)
    page.screenshot(path=str(artifacts_dir / "timeline.png"), full_page=True)

    # The memory page shows everyone consented.
    card.locator(".memory-title a").click()
    expect(page.locator(".notice-ok")).to_contain_text("Everyone in this memory has consented")
    artifacts_dir.joinpath("memory.png").write_bytes(page.screenshot(full_page=True))

    page.click("nav >> text=People")
    expect(page.locator("#people-table")).to_contain_text("Bob")
    artifacts_dir.joinpath("people.png").write_bytes(page.screenshot(full_page=True))
