"""The lifecycle in a real browser (headless Debian chromium): inferred kind, a refused
secret, the expiry filter, and supersession on the memory page over htmx."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from memories.models import SupersessionProposal
from memories.services import memory_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a sturdy passphrase"


def _log_in(page, base: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    expect(page).to_have_url(f"{base}/")


def test_lifecycle_on_the_pages(live_server, browser_page, artifacts_dir):
    from accounts.services import user_signup

    alice = user_signup(username="alice", password=PASSWORD)
    now = timezone.now()
    memory_create(
        owner=alice,
        body="Concert in the park with the choir",
        kind="event",
        occurred_at=now - timedelta(days=40),
    )
    paris = memory_create(
        owner=alice,
        body="Bob lives in Paris, near the canal",
        kind="knowledge",
        occurred_at=now - timedelta(days=90),
    )
    job = memory_create(
        owner=alice,
        body="Bob works at a bakery in Paris",
        kind="knowledge",
        occurred_at=now - timedelta(days=60),
    )
    berlin = memory_create(
        owner=alice,
        body="Bob moved to Berlin for a new job",
        kind="knowledge",
        occurred_at=now - timedelta(days=2),
    )
    # What the worker proposes after embedding (it needs the model to decide).
    SupersessionProposal.objects.create(owner=alice, older=job, newer=berlin, similarity=0.71)

    page = browser_page
    base = live_server.url
    _log_in(page, base)

    # "Work it out" is the default: a reminder becomes a task, said in the message.
    page.fill("#id_body", "Remind me to call the dentist on Friday")
    page.click("button:has-text('Save memory')")
    card = page.locator(".memory-card", has_text="call the dentist")
    expect(card.locator(".tag").first).to_have_text("To do")  # the kind in plain words
    expect(page.locator("#messages")).to_contain_text("Worked out from the text — kind: task")

    # A password is refused in place, the text kept to fix.
    page.fill("#id_body", "Gym locker code. password: hunter22x")
    page.click("button:has-text('Save memory')")
    expect(page.locator("#quick-add")).to_contain_text("Keepsake is not a secret store")
    expect(page.locator("#id_body")).to_have_value("Gym locker code. password: hunter22x")
    expect(page.locator(".memory-card", has_text="locker")).to_have_count(0)

    # The expired concert is marked, and the Expired filter finds only it.
    concert = page.locator(".memory-card", has_text="Concert in the park")
    expect(concert.locator(".tag-expired")).to_have_text("Expired")
    expect(concert.locator(".agent-badge")).to_contain_text("expired, agents no longer see this")
    page.click("summary:has-text('Filter')")
    page.select_option("#filter_expired", "expired")
    page.click("button:has-text('Filter')")
    expect(page.locator(".memory-card")).to_have_count(1)
    expect(page.locator(".memory-card")).to_contain_text("Concert in the park")
    artifacts_dir.joinpath("timeline-expired.png").write_bytes(page.screenshot(full_page=True))

    # On Berlin's page: find the Paris memory by a word (htmx, as you type) and link it.
    page.goto(f"{base}/memories/{berlin.pk}/")
    expect(page.locator(".suggestion")).to_contain_text("This memory may replace")
    page.fill("#supersede-q", "canal")
    expect(page.locator("#id_older option")).to_have_count(2)
    page.select_option("#id_older", str(paris.pk))
    page.click("button:has-text('Link them')")
    section = page.locator("#supersession")
    expect(section).to_contain_text("Linked: this memory replaces “Bob lives in Paris, near the canal”.")
    expect(section.locator(".chain-item")).to_have_count(2)
    expect(section.locator(".chain-item").first).to_contain_text("Replaced by this memory")
    expect(section.locator(".chain-item.is-newest")).to_contain_text("Bob moved to Berlin")
    artifacts_dir.joinpath("memory-supersession.png").write_bytes(page.screenshot(full_page=True))

    # Confirm the worker's suggestion: the bakery memory joins the chain.
    section.locator(".suggestion button:has-text('Confirm')").click()
    expect(section).to_contain_text("Confirmed: “Bob moved to Berlin for a new job” replaces")
    expect(section.locator(".chain-item")).to_have_count(3)
    expect(section.locator(".suggestion")).to_have_count(0)

    # The Paris page says it is replaced; undo there gives it back to agents.
    section.locator(".chain-item", has_text="Bob lives in Paris").locator("a").first.click()
    expect(page.locator("#agent-visibility")).to_contain_text("Replaced by a newer memory")
    artifacts_dir.joinpath("memory-replaced.png").write_bytes(page.screenshot(full_page=True))
    page.locator(".chain-item", has_text="Bob lives in Paris").locator("button:has-text('Undo')").click()
    expect(page.locator("#supersession")).to_contain_text("is no longer replaced")
    expect(page.locator("#agent-visibility")).to_contain_text("your agents may use it")
    expect(page.locator("#agent-visibility")).not_to_contain_text("Replaced")
