"""axe-core on every main page, at 1280 and 390 px: no serious or critical violation.

axe-core comes from npm (`make vendor` copies it to tests/browser/vendor/axe.min.js) and
is injected by Playwright. The pages' Content-Security-Policy refuses inline scripts, so
this browser context bypasses the CSP for the injected engine only (the CSP itself is
tested in test_csp.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from accounts.services import user_signup
from agents.models import Agent
from agents.services import chat_turn, consent_request_create
from circles.services import circle_create, memory_share
from memories.embeddings import embed_text
from memories.models import EdgeKind, MemoryEdge
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

from .conftest import CHROMIUM, CHROMIUM_ARGS, DESKTOP, playwright_running, require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
WIDTHS = (1280, 390)
BLOCKING = {"serious", "critical"}
RUN_AXE = """async () => {
  const result = await axe.run(document, {
    runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]},
    resultTypes: ["violations"],
  });
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => ({target: n.target.join(" "), summary: n.failureSummary})),
  }));
}"""


def require_axe() -> None:
    if not AXE.exists():
        pytest.fail(f"axe-core is missing at {AXE}: run `make vendor` (npm ci copies it there).")


@pytest.fixture
def axe_page():
    """A chromium page whose context lets Playwright inject axe-core despite the CSP."""
    require_chromium()
    require_axe()
    with playwright_running() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport=DESKTOP, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(20_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()


def blocking_violations(page) -> list[dict]:
    page.add_script_tag(path=str(AXE))
    return [v for v in page.evaluate(RUN_AXE) if v["impact"] in BLOCKING]


def duplicate_ids(page) -> list[str]:
    ids = page.evaluate("() => [...document.querySelectorAll('[id]')].map((element) => element.id)")
    return sorted(identifier for identifier, count in Counter(ids).items() if count > 1)


def test_main_pages_have_no_serious_accessibility_violations(live_server, axe_page, artifacts_dir, settings):
    settings.LLM_BASE_URL = ""  # the offline responder
    alice = user_signup(username="alice", password="a sturdy passphrase")
    bob = person_create(owner=alice, display_name="Bob")  # has not consented
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    tulips = memory_create(
        owner=alice,
        title="Tulips",
        body="Carol planted **red** tulips by the river.",
        participants=[ParticipantSpec(person=carol, role="present")],
    )
    chess = memory_create(
        owner=alice, title="Chess", body="Bob taught me chess.", participants=[ParticipantSpec(person=bob)]
    )
    memory_create(owner=alice, body="I walked alone by the river at dawn.", kind="event")
    MemoryEdge.objects.create(owner=alice, source=tulips, target=chess, kind=EdgeKind.SIMILAR, weight=0.7)
    circle = circle_create(owner=alice, name="Family")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice, audience=circle.audience)
    memory_share(memory=tulips, circle=circle, by=alice)
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")
    embed_text("warm up")
    turn = chat_turn(owner=alice, agent=caregiver, text="Who planted the tulips by the river?")
    chat_turn(owner=alice, agent=caregiver, text="What about Bob?", conversation=turn.conversation)
    consent_request_create(owner=alice, person=bob, agent=caregiver, conversation=turn.conversation)

    page = axe_page
    base = live_server.url
    failures: dict[str, list[dict]] = {}

    page.goto(f"{base}{reverse('login')}")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        if found := blocking_violations(page):
            failures[f"login@{width}"] = found

    page.fill("#id_username", "alice")
    page.fill("#id_password", "a sturdy passphrase")
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{base}/")

    pages = {
        "timeline": reverse("timeline"),
        "memory": reverse("memory_detail", args=[tulips.pk]),
        "people": reverse("person_list"),
        "person": reverse("person_detail", args=[bob.pk]),
        "search": reverse("memory_search") + "?q=river",
        "chat": reverse("agent_conversation", args=[caregiver.pk, turn.conversation.pk]),
        "agents": reverse("agent_list"),
        "circles": reverse("circle_list"),
        "circle": reverse("circle_detail", args=[circle.pk]),
        "circle-chat": reverse("circle_chat", args=[circle.pk]),
        "settings": reverse("settings"),
        "inbox": reverse("inbox"),
        "my-consents": reverse("my_consents"),
        "universe": reverse("universe"),
        "not-found": "/memories/00000000-0000-0000-0000-000000000000/",
    }
    duplicated: dict[str, list[str]] = {}
    for name, url in pages.items():
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(base + url)
            page.wait_for_load_state("networkidle")
            if name == "universe":
                expect(page.locator("#universe-graph[data-drawn]")).to_be_attached()
            if found := blocking_violations(page):
                failures[f"{name}@{width}"] = found
            if ids := duplicate_ids(page):
                duplicated[f"{name}@{width}"] = ids
            if width == 390 and name in {"timeline", "memory", "chat", "inbox", "universe", "not-found"}:
                artifacts_dir.joinpath(f"a11y-{name}-390.png").write_bytes(page.screenshot(full_page=True))

    report = artifacts_dir / "axe-report.json"
    report.write_text(json.dumps({"violations": failures, "duplicate_ids": duplicated}, indent=2))
    assert not failures, f"serious/critical axe violations (details in {report}):\n" + json.dumps(
        failures, indent=1
    )
    assert not duplicated, f"element ids used twice on one page: {duplicated}"


def test_skip_link_moves_focus_to_the_main_content(live_server, axe_page):
    user_signup(username="alice", password="a sturdy passphrase")
    page = axe_page
    base = live_server.url
    # A page without an autofocused field, so the first Tab starts at the top.
    page.goto(f"{base}/no-such-page/")
    page.keyboard.press("Tab")
    skip = page.locator("a.skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/no-such-page/#main")
    assert page.evaluate("document.activeElement.id") == "main"
    # The favicon is linked and served.
    href = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(base + href).status == 200
