"""The Universe in chromium at 1280 and 390 px, on a journal of 5,000 memories: capped with a message,
gated memories marked, filter by person, a node opens its page."""

from __future__ import annotations

import datetime
import random
import re

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from accounts.services import user_signup
from memories.models import EdgeKind, Memory, MemoryEdge, MemoryParticipant
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MEMORIES = 5_000


def _journal(alice) -> dict:
    """5,000 memories over ten years, eight people (two have not consented), edges between neighbours."""
    rng = random.Random(16)
    people = []
    for index, name in enumerate(["Anna", "Bob", "Carol", "Dev", "Emil", "Farah", "Gus", "Hana"]):
        person = person_create(owner=alice, display_name=name)
        if index >= 2:
            person_set_consent(person=person, status=ConsentStatus.GRANTED, actor=alice)
        people.append(person)
    start = timezone.now() - datetime.timedelta(days=3650)
    memories = Memory.objects.bulk_create(
        Memory(
            owner=alice,
            title=f"Day {index}",
            body=f"Memory {index}: a walk, a meal, a talk.",
            occurred_at=start + datetime.timedelta(hours=17 * index),
        )
        for index in range(MEMORIES)
    )
    MemoryParticipant.objects.bulk_create(
        MemoryParticipant(memory=memory, person=rng.choice(people))
        for memory in memories
        if rng.random() < 0.6
    )
    MemoryEdge.objects.bulk_create(
        MemoryEdge(owner=alice, source=memory, target=memories[index + 1], kind=EdgeKind.SIMILAR, weight=0.7)
        for index, memory in enumerate(memories[:-1])
        if index % 3
    )
    return {"people": people, "memories": memories}


@pytest.mark.parametrize("width", [1280, 390])
def test_universe_draws_a_capped_graph_filters_by_person_and_opens_a_node(
    live_server, browser_page, artifacts_dir, width
):
    alice = user_signup(username="alice", password="a sturdy passphrase")
    journal = _journal(alice)
    anna = journal["people"][0]
    page = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base = live_server.url
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "a sturdy passphrase")
    page.click("button[type=submit]")

    # From the header (on a phone, behind its Menu button).
    menu = page.get_by_role("button", name="Menu")
    if menu.is_visible():
        menu.click()
    page.locator("nav a", has_text="Universe").click()
    expect(page).to_have_url(f"{base}{reverse('universe')}")
    expect(page.locator("#universe-summary")).to_contain_text("Showing the 300 most recent of 5000 memories")
    graph = page.locator("#universe-graph[data-drawn]")
    try:
        expect(graph).to_be_attached(timeout=30_000)
    except AssertionError:
        artifacts_dir.joinpath(f"universe-failed-{width}.png").write_bytes(page.screenshot(full_page=True))
        shown = page.locator("#universe-graph").inner_text()
        raise AssertionError(f"the graph was not drawn: {shown!r}, page errors {errors}") from None
    drawn = int(graph.get_attribute("data-drawn"))
    assert 300 < drawn <= 308  # 300 memories and the people in them
    gated = page.evaluate("window.keepsakeUniverse.nodes('[type = \"memory\"][?gated]').length")
    assert gated > 0  # Anna's and Bob's memories: they have not consented
    artifacts_dir.joinpath(f"universe-{width}.png").write_bytes(page.screenshot(full_page=True))

    # Filter by person: only Anna's memories and Anna.
    page.select_option("#id_person", label="Anna")
    page.click("button:has-text('Show')")
    expect(page).to_have_url(re.compile(rf"person={anna.pk}"))
    expect(page.locator("#universe-graph[data-drawn]")).to_be_attached(timeout=30_000)
    people = page.evaluate("window.keepsakeUniverse.nodes('[type = \"person\"]').map((n) => n.data('label'))")
    assert people == ["Anna"]
    assert page.evaluate("window.keepsakeUniverse.nodes('[type = \"memory\"][!gated]').length") == 0
    artifacts_dir.joinpath(f"universe-anna-{width}.png").write_bytes(page.screenshot(full_page=True))

    # Selecting a node opens its page: Anna's node, clicked where it is drawn.
    page.locator("#universe-graph").scroll_into_view_if_needed()
    page.evaluate("window.keepsakeUniverse.fit(window.keepsakeUniverse.nodes('[type = \"person\"]'), 120)")
    box = page.locator("#universe-graph").bounding_box()
    position = page.evaluate(
        "(() => { const p = window.keepsakeUniverse.nodes('[type = \"person\"]')[0].renderedPosition();"
        " return [p.x, p.y]; })()"
    )
    page.mouse.click(box["x"] + position[0], box["y"] + position[1])
    expect(page).to_have_url(f"{base}{reverse('person_detail', args=[anna.pk])}")
    assert errors == []
