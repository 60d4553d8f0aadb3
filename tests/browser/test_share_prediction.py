"""Sharing you can predict (issue #39 item 3), in chromium: before sharing, the Share panel says
member by member who will see the memory and why not, with what to do; after, the circle's
page says "Seen by N of M members"; a member with nothing to see is told the true rule."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from circles.services import circle_create, memory_share
from memories.services import ParticipantSpec, memory_create
from people.models import Person
from tests.browser.scenario import DESKTOP, PHONE, _join, a_lived_in_journal, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _member_row(row, name: str):
    # The inner locator of `has` is relative to each .share-member: made from the page.
    return row.locator(".share-member", has=row.page.locator(".share-member-name", has_text=name))


def test_the_share_panel_says_who_will_see_it_before_and_after(live_server, new_person_page, artifacts_dir):
    journal = a_lived_in_journal()
    patel = Person.objects.get(owner=journal.ana, display_name="Dr Patel")
    checkup = memory_create(
        owner=journal.ana,
        title="Check-up",
        body="Check-up went fine.",
        sensitivity="public",
        participants=[ParticipantSpec(person=patel)],
    )
    page = new_person_page()
    base = live_server.url
    log_in(page, base, "ana")

    # "Coffee with Ben": personal, about Ben, not shared yet.
    page.goto(base + reverse("memory_detail", args=[journal.coffee.pk]))
    panel = page.locator("#share-panel")
    row = panel.locator(".share-row", has_text="Family")
    expect(row.locator(".share-seen")).to_have_text("If you share it: seen by 2 of 3 members.")
    expect(_member_row(row, "ben").locator(".badge")).to_have_text("Sees it")
    carol = _member_row(row, "carol")
    expect(carol.locator(".badge")).to_have_text("Won't see it")
    expect(carol).to_contain_text("personal and not about them")
    expect(carol.get_by_role("link", name="mark it public")).to_have_attribute(
        "href", reverse("memory_edit", args=[journal.coffee.pk]) + "#id_sensitivity"
    )
    for width, viewport in (("1280", DESKTOP), ("390", PHONE)):
        page.set_viewport_size(viewport)
        panel.screenshot(path=str(artifacts_dir / f"share_prediction_{width}.png"))
    page.set_viewport_size(DESKTOP)
    row.get_by_role("button", name="Share").click()
    expect(panel).to_contain_text("Shared into Family: seen by 2 of 3 members.")
    expect(row.locator(".share-seen")).to_have_text("Seen by 2 of 3 members.")

    # Someone in it has not consented: the panel names them and where to ask.
    page.goto(base + reverse("memory_detail", args=[checkup.pk]))
    row = page.locator("#share-panel .share-row", has_text="Family")
    expect(row.locator(".share-seen")).to_have_text("If you share it: seen by 1 of 3 members — only you.")
    ben = _member_row(row, "ben")
    expect(ben).to_contain_text("Dr Patel has not consented for Family (pending)")
    ask = ben.get_by_role("link", name="ask Dr Patel for consent to Family")
    expect(ask).to_have_attribute(
        "href", reverse("person_detail", args=[patel.pk]) + f"#audience-{journal.family.pk}"
    )

    # The circle's page: each memory says how many members see it.
    page.goto(base + reverse("circle_detail", args=[journal.family.pk]))
    cards = page.locator(".circle-card")
    expect(cards.filter(has_text="Coffee with Ben").locator(".seen-by")).to_have_text(
        "Seen by 2 of 3 members"
    )
    expect(cards.filter(has_text="Ran my first 10k").locator(".seen-by")).to_have_text(
        "Seen by 1 of 3 members"
    )
    expect(cards.filter(has_text="Mum's 60th").locator(".seen-by")).to_have_text("Seen by 3 of 3 members")

    # Ben sees what the panel said he would; Carol does not see "Coffee with Ben".
    ben_page = new_person_page()
    log_in(ben_page, base, "ben")
    ben_page.goto(base + reverse("circle_detail", args=[journal.family.pk]))
    expect(ben_page.locator(".circle-card", has_text="Coffee with Ben")).to_be_visible()
    # Only the owner is told how many see a memory (the count would say who is linked to whom).
    expect(ben_page.locator(".circle-card", has_text="Coffee with Ben").locator(".seen-by")).to_have_count(0)
    carol_page = new_person_page()
    log_in(carol_page, base, "carol")
    carol_page.goto(base + reverse("circle_detail", args=[journal.family.pk]))
    expect(carol_page.locator(".circle-card", has_text="Mum's 60th")).to_be_visible()
    expect(carol_page.locator(".circle-card", has_text="Coffee with Ben")).to_have_count(0)


def test_a_member_with_nothing_to_see_is_told_the_true_rule(live_server, new_person_page):
    journal = a_lived_in_journal()
    club = circle_create(owner=journal.ana, name="Book club")
    _join(club, journal.ana, journal.carol)
    memory_share(memory=journal.run, circle=club, by=journal.ana)  # personal, about nobody
    page = new_person_page()
    log_in(page, live_server.url, "carol")
    page.goto(live_server.url + reverse("circle_detail", args=[club.pk]))
    expect(page.locator(".circle-card")).to_have_count(0)
    why = page.locator(".empty-why")
    expect(why).to_contain_text("everyone in it has consented to Book club")
    expect(why).to_contain_text("personal or sensitive and about you")
