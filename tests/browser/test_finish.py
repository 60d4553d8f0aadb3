"""The finish list of issue #39, each checked in headless chromium on Ana's, Ben's and Carol's
journal (tests/browser/scenario.py): what looked unfinished is finished and stays so."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from circles.agent import circle_chat_turn, circle_conversation
from memories.models import Memory
from memories.services import memory_create
from people.services import person_create
from tests.browser.scenario import DESKTOP, PHONE, a_lived_in_journal, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def journal(db):
    return a_lived_in_journal()


def _box(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None, locator
    return box


def _inside(inner: dict, outer: dict) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["y"] >= outer["y"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


def test_the_search_excerpt_is_inside_its_card(live_server, new_person_page, journal):
    page = new_person_page()
    log_in(page, live_server.url, "ana")
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(live_server.url + "/search/?q=speech")
        card = page.locator(".memory-card", has_text="Mum's 60th")
        excerpt = card.locator(".search-match")
        expect(excerpt).to_contain_text("speech")
        assert _inside(_box(excerpt), _box(card)), viewport


def test_cards_name_kinds_in_plain_words_or_not_at_all(live_server, new_person_page, journal):
    memory_create(
        owner=journal.ana, title="Call the plumber", body="Call the plumber about the tap.", kind="task"
    )
    page = new_person_page()
    log_in(page, live_server.url, "ana")
    tags = page.locator(".memory-card .memory-meta .tag").all_inner_texts()
    jargon = {"preference", "identity", "knowledge", "relationship", "observation", "context"}
    assert not {tag.strip().lower() for tag in tags} & jargon, tags
    expect(page.locator(".memory-card", has_text="Call the plumber").locator(".tag-kind")).to_have_text(
        "To do"
    )
    page.goto(live_server.url + reverse("memory_detail", args=[journal.run.pk]))
    assert "preference" not in page.locator(".memory-meta").inner_text().lower()


def test_who_told_you_offers_i_saw_it_myself_and_not_self(live_server, new_person_page, journal):
    page = new_person_page()
    log_in(page, live_server.url, "ana")
    page.goto(live_server.url + reverse("memory_edit", args=[journal.sixtieth.pk]))
    options = [text.strip() for text in page.locator("#id_source_person option").all_inner_texts()]
    assert "I saw it myself" in options
    assert "Self" not in options and "Mum" in options


def test_self_counts_the_memories_with_nobody_else_in_them(live_server, new_person_page, journal):
    alone = Memory.objects.filter(
        owner=journal.ana, participants__isnull=True, source_person__isnull=True
    ).count()
    assert alone == 2  # "Ran my first 10k" and "Garden"
    page = new_person_page()
    log_in(page, live_server.url, "ana")
    page.goto(live_server.url + reverse("person_list"))
    row = page.locator("tr", has=page.locator("a", has_text="Self"))
    expect(row.locator("td.num")).to_have_text(str(alone))


def test_the_memory_page_uses_the_width_of_a_desktop(live_server, new_person_page, journal):
    page = new_person_page()
    page.set_viewport_size(DESKTOP)
    log_in(page, live_server.url, "ana")
    page.goto(live_server.url + reverse("memory_detail", args=[journal.sixtieth.pk]))
    card = _box(page.locator("#memory-main"))
    main = _box(page.locator("main"))
    assert card["width"] >= 0.95 * main["width"], (card, main)
    share = _box(page.locator("#share-panel"))
    body = _box(page.locator(".memory-fulltext"))
    assert share["x"] > body["x"] + body["width"], "Share sits beside the memory, not under it"
    assert share["y"] < body["y"] + 400


def test_who_has_seen_this_names_the_circles_agent(live_server, new_person_page, journal):
    conversation = circle_conversation(circle=journal.family, user=journal.ben, private=False)
    circle_chat_turn(conversation=conversation, user=journal.ben, text="What about the speech at Mum's 60th?")
    page = new_person_page()
    log_in(page, live_server.url, "ana")
    page.goto(live_server.url + reverse("memory_detail", args=[journal.sixtieth.pk]))
    log = page.locator("#access-log")
    expect(log).to_contain_text("the circle's agent, asked by ben")
    expect(log).not_to_contain_text("(deleted)")

    # And the circle chat cites the memory by its title, not "ana, 18 Nov".
    page.goto(live_server.url + reverse("circle_chat", args=[journal.family.pk]))
    cited = page.locator(".cited-memory").first
    expect(cited).to_contain_text("Mum's 60th")


def test_inbox_and_consents_speak_to_whoever_reads_them(live_server, new_person_page, journal):
    ana = new_person_page()
    log_in(ana, live_server.url, "ana")
    ana.goto(live_server.url + reverse("inbox"))
    expect(ana.locator("main")).to_contain_text("Ben set their consent for your agents to granted")
    expect(ana.locator("main")).not_to_contain_text("for their agents")

    ben = new_person_page()
    log_in(ben, live_server.url, "ben")
    ben.goto(live_server.url + reverse("my_consents"))
    placeholders = [
        field.get_attribute("placeholder") or "" for field in ben.locator("input[name=reason]").all()
    ]
    assert placeholders and not any("asked her" in text for text in placeholders), placeholders


def test_invite_to_link_leaves_room_above_the_heading_below(live_server, new_person_page, journal):
    page = new_person_page()
    log_in(page, live_server.url, "ana")
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(live_server.url + reverse("person_detail", args=[journal.mum.pk]))
        page.locator("#link-panel button[type=submit]").first.click()
        # The panel the click brings back (its one-time link shown): the second time round the
        # page already had a heading, and measuring that one as htmx swapped it out read 0 px.
        expect(page.locator("#link-panel .invite-new")).to_be_visible()
        heading = page.locator("#link-panel h3", has_text="Open invitation")
        expect(heading).to_be_visible()
        gap = heading.evaluate(
            "(h) => h.getBoundingClientRect().top - h.previousElementSibling.getBoundingClientRect().bottom"
        )
        assert gap >= 12, f"{viewport}: {gap}px between the form above and the heading"


def test_universe_labels_never_overlap(live_server, new_person_page, journal):
    people = [
        person_create(owner=journal.ana, display_name=name) for name in ("Anna", "Bruno", "Chen", "Dara")
    ]
    from memories.services import ParticipantSpec

    for index in range(24):
        memory_create(
            owner=journal.ana,
            title=f"Evening walk number {index} by the harbour",
            body=f"Walk {index} with friends.",
            participants=[
                ParticipantSpec(person=people[index % 4]),
                ParticipantSpec(person=people[(index + 1) % 4]),
            ],
        )
    page = new_person_page()
    log_in(page, live_server.url, "ana")
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(live_server.url + reverse("universe"))
        page.wait_for_selector("#universe-graph[data-drawn]")
        overlaps = page.evaluate(
            """() => {
              const cy = window.keepsakeUniverse;
              const shown = cy.nodes().filter((node) => !node.hasClass('label-hidden'));
              const boxes = shown.map((node) => ({
                id: node.data('label'),
                box: node.boundingBox({ includeNodes: false, includeEdges: false, includeLabels: true }),
              })).filter((item) => item.box.w > 0);
              const hit = (a, b) => a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;
              const out = [];
              boxes.forEach((a, i) => boxes.slice(i + 1).forEach((b) => {
                if (hit(a.box, b.box)) out.push([a.id, b.id]);
              }));
              return { out, shown: boxes.length };
            }"""
        )
        assert overlaps["shown"] >= 5, overlaps  # labels are shown, not all hidden
        assert not overlaps["out"], overlaps["out"]


def test_capture_logs_no_policy_violation(live_server, new_person_page, journal):
    page = new_person_page()
    violations = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', (event) => console.error("
        "'Content Security Policy violation: ' + event.violatedDirective + ' ' + event.blockedURI));"
    )
    log_in(page, live_server.url, "ana")
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(live_server.url + "/")
        if viewport == PHONE:
            page.get_by_role("link", name="Add a memory").click()
        page.click("#id_body")
        page.keyboard.type("Tea with @Mu")
        expect(page.get_by_role("listbox", name="People to mention")).to_be_visible()
        page.keyboard.press("Enter")
        page.keyboard.type("in the garden.")
        page.click("summary:has-text('More')")
        page.locator("#quick-add button[type=submit]").first.click()
        expect(page.locator(".memory-card", has_text="in the garden").first).to_be_visible()
    assert not violations, violations
