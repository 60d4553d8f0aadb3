"""The Circles journey in headless chromium, one browser context per person.

Alice owns the circle "Family", Bob joins it through an invite link. A memory
with Carol reaches Bob only while Carol has consented to Family, and Bob loses
the circle itself the moment Alice removes him.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser.conftest import DESKTOP

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a sturdy passphrase"
# The innermost elements of the page's content that stick out past the window's right
# edge (a sideways scroll on a phone). The site header is every page's, not the circles'.
WIDER_THAN_WINDOW = """() => {
  const limit = document.documentElement.clientWidth;
  const out = [...document.querySelectorAll("main *")].filter(
    (el) => el.getBoundingClientRect().right > limit + 0.5 && el.getClientRects().length
  );
  return out
    .filter((el) => !out.some((other) => other !== el && el.contains(other)))
    .map((el) => {
      const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
        + (el.className ? "." + el.className : "");
      const text = el.textContent.trim().slice(0, 40);
      return `<${name}> "${text}" ends at ${Math.round(el.getBoundingClientRect().right)}px`;
    });
}"""


def sign_up(page: Page, username: str) -> None:
    """Fill in the real sign-up page the browser is on and submit it."""
    page.fill("#id_username", username)
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("button:has-text('Create account')")


def shoot(page: Page, path: Path, *, width: int, element: Locator | None = None) -> None:
    """A screenshot at this width; nothing in the page's content may be wider than the window."""
    page.set_viewport_size({"width": width, "height": DESKTOP["height"] if width >= 1280 else 844})
    too_wide = page.evaluate(WIDER_THAN_WINDOW)
    assert not too_wide, f"{path.name}: wider than the {width}px window: {too_wide}"
    if element is None:
        page.screenshot(path=str(path), full_page=True)
    else:
        element.screenshot(path=str(path))
    page.set_viewport_size(DESKTOP)


def audit_entry(page: Page, username: str) -> Locator:
    """Bob's line under "In Family" in the memory page's "Who can see this"."""
    return page.locator("#privacy-audit .audit-entry", has=page.locator(".audit-who", has_text=username))


def set_circle_consent(page: Page, circle_id: str, status: str, reason: str) -> None:
    """On the person page: the circle's own switch (not My agents')."""
    audience = page.locator(f"#audience-{circle_id}")
    audience.locator(f"input[name=status][value={status}]").check()
    audience.locator("textarea[name=reason], input[name=reason]").fill(reason)
    audience.locator("button:has-text('Update Family')").click()
    expect(page.locator(f"#audience-{circle_id} .consent-now .badge")).to_have_text(status.capitalize())


def test_family_circle_shows_carols_memory_to_bob_only_while_carol_consents(
    live_server, new_person_page, artifacts_dir
):
    base = live_server.url
    alice = new_person_page()
    bob = new_person_page()

    # Alice signs up and creates Family.
    alice.goto(f"{base}/accounts/signup/")
    sign_up(alice, "alice")
    expect(alice).to_have_url(f"{base}/")
    alice.click("nav >> text=Circles")
    alice.fill("#id_name", "Family")
    alice.fill("#id_description", "Grandma's stories, the garden, Sunday lunches.")
    alice.click("button:has-text('Create circle')")
    expect(alice.locator("h1")).to_have_text("Family")
    expect(alice).to_have_url(re.compile(r"/circles/[0-9a-f-]{36}/$"))
    circle_url = alice.url
    circle_id = circle_url.rstrip("/").rsplit("/", 1)[1]

    # She makes an invite link: shown once, in place.
    alice.click("button:has-text('Make an invite link')")
    link_field = alice.locator("#new-invite-url")
    expect(link_field).to_have_value(re.compile(r"/circles/invites/[^/]+/$"))
    invite_url = link_field.input_value()
    shoot(alice, artifacts_dir / "circles_page_owner_1280.png", width=1280)
    shoot(alice, artifacts_dir / "circles_page_owner_390.png", width=390)

    # Bob opens it signed out, signs up from it, comes straight back and asks to join.
    bob.goto(invite_url)
    expect(bob.locator("h1")).to_have_text("Join Family")
    expect(bob.locator("#invite-card")).to_contain_text("alice invites you to join Family")
    bob.click("#invite-card >> text=Sign up")
    sign_up(bob, "bob")
    expect(bob).to_have_url(invite_url)
    bob.click("button:has-text('Ask to join')")
    expect(bob.locator("#invite-card")).to_contain_text("Waiting for alice to approve")

    # Alice sees the request and approves it: Bob is a member.
    alice.goto(circle_url)
    requests = alice.locator("#circle-requests")
    expect(requests.locator(".request-row")).to_contain_text("bob asks to join")
    requests.locator("button:has-text('Approve')").click()
    expect(alice.locator("#circle-requests")).to_contain_text("bob is now a member of Family.")
    expect(alice.locator("#circle-members .member-list")).to_contain_text("bob")
    bob.reload()
    expect(bob.locator("#invite-card")).to_contain_text("You are a member of Family.")

    # Alice adds Carol, who starts pending (for Family too), and a public memory with her.
    alice.click("nav >> text=People")
    alice.fill("#id_display_name", "Carol")
    alice.click("button:has-text('Add person')")
    expect(alice.locator("h1")).to_contain_text("Carol")
    expect(alice.locator(f"#audience-{circle_id} .consent-now .badge")).to_have_text("Pending")
    carol_url = alice.url

    alice.click("nav >> text=Timeline")
    alice.fill("#id_body", "Carol planted red tulips along the garden fence.")
    alice.click("summary:has-text('More')")
    alice.fill("#id_title", "Tulips with Carol")
    alice.select_option("#id_sensitivity", "public")
    alice.select_option("#id_people-0-person", label="Carol")
    alice.select_option("#id_people-0-role", "present")
    alice.click("button:has-text('Save memory')")
    alice.locator(".memory-card", has_text="Tulips with Carol").locator(".memory-title a").click()
    expect(alice.locator("h1")).to_have_text("Tulips with Carol")
    memory_url = alice.url

    # Sharing into Family is refused, naming Carol; nothing was shared.
    share_panel = alice.locator("#share-panel")
    family_row = alice.locator("#share-panel .share-row", has_text="Family")
    expect(alice.locator("#privacy-audit")).to_contain_text("Not shared into any circle")
    family_row.locator("button:has-text('Share')").click()
    refusal = alice.locator("#share-panel .form-errors")
    expect(refusal).to_contain_text("Not shared into Family")
    expect(refusal).to_contain_text("Carol (pending)")
    expect(refusal).to_contain_text("Nothing was shared.")
    expect(family_row).to_contain_text("Not shared")
    shoot(alice, artifacts_dir / "circles_share_panel_1280.png", width=1280, element=share_panel)
    shoot(alice, artifacts_dir / "circles_share_panel_390.png", width=390, element=share_panel)

    # Alice records Carol's yes on Carol's page, with the Family switch, then shares.
    refusal.locator("a", has_text="Carol").click()
    expect(alice).to_have_url(carol_url)
    set_circle_consent(alice, circle_id, "granted", "Carol is happy for the family to see")
    expect(alice.locator("#audience-agents .consent-now .badge")).to_have_text("Pending")
    alice.goto(memory_url)
    family_row.locator("button:has-text('Share')").click()
    expect(alice.locator("#share-panel")).to_contain_text("Shared into Family: seen by 2 of 2 members.")
    expect(family_row.locator(".share-name .badge")).to_have_text("Shared")
    expect(audit_entry(alice, "bob").locator(".badge")).to_have_text("Yes")

    # Bob's next look at Family shows the memory, Alice's.
    bob.goto(circle_url)
    card = bob.locator(".circle-card", has_text="Tulips with Carol")
    expect(card).to_be_visible()
    expect(card.locator(".memory-owner")).to_have_text("alice")
    expect(bob.locator(".circle-head")).to_contain_text("alice's circle · you are a member")
    shoot(bob, artifacts_dir / "circles_page_1280.png", width=1280)
    shoot(bob, artifacts_dir / "circles_page_390.png", width=390)

    # Carol withdraws (Alice records it): the memory leaves Family on Bob's next load.
    alice.goto(carol_url)
    set_circle_consent(alice, circle_id, "revoked", "Carol would rather keep it private")
    bob.reload()
    expect(bob.locator("#memory-list .empty-state")).to_contain_text("Nothing here for you yet")
    expect(bob.locator(".circle-card")).to_have_count(0)
    alice.goto(memory_url)
    expect(family_row).to_contain_text("Carol")
    bob_audit = audit_entry(alice, "bob")
    expect(bob_audit.locator(".badge")).to_have_text("No")
    expect(bob_audit).to_contain_text("Carol has not consented for Family (revoked)")

    # Alice removes Bob: his next request for Family is a 404.
    alice.goto(circle_url)
    alice.locator("#circle-members li", has_text="bob").locator("a:has-text('Remove…')").click()
    expect(alice.locator("h1")).to_have_text("Remove bob from Family?")
    alice.click("button:has-text('Remove')")
    expect(alice.locator(".message")).to_contain_text("Removed bob from Family.")
    expect(alice.locator("#circle-members .member-list")).not_to_contain_text("bob")
    response = bob.goto(circle_url)
    assert response is not None and response.status == 404
