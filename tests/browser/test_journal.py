"""The everyday journal in headless Debian chromium, at 1280 and 390 px: quick capture with
@mentions, the calendar, On this day, and a person's page with a birthday and a photo."""

from __future__ import annotations

import io
from datetime import date, datetime, time, timedelta

import pytest
from django.utils import timezone
from PIL import Image
from playwright.sync_api import expect

from memories.dates import occurred_day
from memories.models import Memory
from memories.services import memory_create
from people.models import ConsentStatus, Person
from people.services import person_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "a sturdy passphrase"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def alice(db):
    from accounts.services import user_signup

    return user_signup(username="alice", password=PASSWORD)


def _log_in(page, base: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    expect(page).to_have_url(f"{base}/")


def _shot(page, artifacts_dir, name: str) -> None:
    artifacts_dir.joinpath(f"{name}.png").write_bytes(page.screenshot(full_page=True))


def _years_ago(years: int, hour: int | None = None) -> datetime:
    today = timezone.localdate()
    try:
        day = today.replace(year=today.year - years)
    except ValueError:  # 29 February
        day = today.replace(year=today.year - years, day=28)
    if hour is None:
        return occurred_day(day)
    return timezone.make_aware(datetime.combine(day, time(hour, 0)))


def _a_little_journal(alice) -> dict:
    anna = person_create(owner=alice, display_name="Anna Lindqvist", aliases=["Annie"], relationship="sister")
    ben = person_create(owner=alice, display_name="Ben")
    ben.consent_status = ConsentStatus.GRANTED
    ben.save(update_fields=["consent_status"])
    memory_create(
        owner=alice, title="Harbour walk", body="Walked the harbour at dusk.", occurred_at=_years_ago(0, 7)
    )
    memory_create(owner=alice, body="First snow of the winter.", occurred_at=occurred_day(date(2024, 1, 14)))
    memory_create(
        owner=alice, title="Old flat", body="Moved out of the old flat.", occurred_at=_years_ago(1, 10)
    )
    memory_create(owner=alice, body="Graduation day, everyone came.", occurred_at=_years_ago(3))
    return {"anna": anna, "ben": ben}


def test_quick_capture_with_a_mention_at_1280(live_server, browser_page, artifacts_dir, alice):
    _a_little_journal(alice)
    page = browser_page
    page.set_viewport_size(DESKTOP)
    base = live_server.url
    _log_in(page, base)

    # One box and Save; everything else waits behind "More".
    expect(page.locator("#id_body")).to_be_visible()
    expect(page.locator("#id_title")).to_be_hidden()
    expect(page.locator(".month-heading").first).to_be_visible()

    # "@ann" offers Anna; Enter puts her name in the text.
    page.click("#id_body")
    page.keyboard.type("Coffee with @ann")
    listbox = page.get_by_role("listbox", name="People to mention")
    expect(listbox).to_be_visible()
    expect(listbox.get_by_role("option")).to_have_count(1)
    expect(listbox.get_by_role("option").first).to_contain_text("Anna Lindqvist")
    option_id = listbox.get_by_role("option").first.get_attribute("id")
    expect(page.locator("#id_body")).to_have_attribute("aria-activedescendant", option_id)
    _shot(page, artifacts_dir, "capture_mention_1280")
    page.keyboard.press("Enter")
    expect(listbox).to_have_count(0)
    page.keyboard.type("by the harbour, she brought cinnamon buns.")
    expect(page.locator("#id_body")).to_have_value(
        "Coffee with @Anna Lindqvist by the harbour, she brought cinnamon buns."
    )

    # A date long ago, no time: the card lands in its place, shown without a time.
    page.click("summary:has-text('More')")
    page.fill("#id_occurred_at", "2024-01-20")
    page.locator("#id_body").press("Control+Enter")
    card = page.locator(".memory-card", has_text="cinnamon buns")
    expect(card).to_be_visible()
    expect(card.locator("time")).to_have_text("20 Jan 2024")
    expect(card.locator("a.chip")).to_contain_text("Anna Lindqvist")
    expect(card.locator(".tag-new")).to_have_text("Just saved")
    # Newest first: last year's move, then this (20 January 2024), then the snow of the 14th.
    cards = page.locator(".memory-card").all_inner_texts()
    position = {
        word: next(i for i, text in enumerate(cards) if word in text)
        for word in ("Old flat", "cinnamon", "First snow")
    }
    assert position["Old flat"] < position["cinnamon"] < position["First snow"]
    expect(page.locator(".month-heading", has_text="January 2024")).to_have_count(1)
    expect(page.locator("#id_body")).to_have_value("")
    memory = Memory.objects.get(body__contains="cinnamon")
    assert {p.person.display_name for p in memory.participants.all()} == {"Anna Lindqvist"}

    # Someone new: asked first, then created pending on the second save.
    page.fill("#id_body", "Met @Zed at the climbing wall.")
    page.click("button:has-text('Save memory')")
    expect(page.locator(".mention-question")).to_contain_text("Add “Zed” as a new person")
    assert not Person.objects.filter(display_name="Zed").exists()
    _shot(page, artifacts_dir, "capture_new_name_1280")
    page.click("button:has-text('Save memory')")
    expect(page.locator(".memory-card", has_text="climbing wall").locator(".agent-badge")).to_contain_text(
        "Zed (pending)"
    )
    assert Person.objects.get(display_name="Zed").consent_status == ConsentStatus.PENDING
    page.evaluate("window.scrollTo(0, 0)")
    _shot(page, artifacts_dir, "timeline_1280")


def test_quick_capture_on_a_phone_puts_the_timeline_first(live_server, browser_page, artifacts_dir, alice):
    _a_little_journal(alice)
    page = browser_page
    page.set_viewport_size(PHONE)
    base = live_server.url
    _log_in(page, base)

    # The memories come first; the form waits behind the floating "+".
    expect(page.locator("#quick-add")).to_be_hidden()
    fab = page.get_by_role("link", name="Add a memory")
    expect(fab).to_be_visible()
    first_card = page.locator(".memory-card").first
    assert first_card.bounding_box()["y"] < PHONE["height"]
    _shot(page, artifacts_dir, "timeline_390")

    fab.click()
    expect(page.locator("#quick-add")).to_be_visible()
    expect(page.locator("#id_body")).to_be_focused()
    page.keyboard.type("Picnic with @be")
    expect(page.get_by_role("listbox").get_by_role("option", name="Ben")).to_be_visible()
    page.keyboard.press("Tab")
    page.keyboard.type("in the park.")
    _shot(page, artifacts_dir, "capture_390")
    page.locator("#id_body").press("Control+Enter")
    card = page.locator(".memory-card", has_text="Picnic with @Ben")
    expect(card).to_be_visible()
    expect(card.locator("a.chip")).to_contain_text("Ben")
    expect(page.locator("#quick-add")).to_be_hidden()
    # Nothing spills past the screen's edge.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_add_another_person_without_javascript(live_server, browser_page, artifacts_dir, alice):
    _a_little_journal(alice)
    context = browser_page.context.browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    page = context.new_page()
    try:
        base = live_server.url
        _log_in(page, base)
        page.click("summary:has-text('More')")
        page.fill("#id_body", "Board games night with @Ben")
        page.select_option("#id_people-0-person", label="Anna Lindqvist")
        page.select_option("#id_people-1-person", label="Ben")
        page.select_option("#id_people-2-person", label="Self")
        page.click("button:has-text('Add another person')")
        # The server sent the same form back, one row longer, with what was chosen.
        expect(page.locator("#id_people-TOTAL_FORMS")).to_have_value("4")
        expect(page.locator("#id_people-3-person")).to_be_visible()
        expect(page.locator("#id_body")).to_have_value("Board games night with @Ben")
        expect(page.locator("#id_people-1-person option:checked")).to_have_text("Ben")
        page.fill("#id_people-3-new_name", "Carla")
        _shot(page, artifacts_dir, "capture_no_js_1280")
        page.click("button:has-text('Save memory')")
        expect(page.locator(".message")).to_contain_text("Memory saved")
        memory = Memory.objects.get(body__startswith="Board games")
        names = {p.person.display_name for p in memory.participants.all()}
        assert names == {"Anna Lindqvist", "Ben", "Self", "Carla"}
    finally:
        context.close()


def test_calendar_and_on_this_day(live_server, browser_page, artifacts_dir, alice):
    _a_little_journal(alice)
    page = browser_page
    page.set_viewport_size(DESKTOP)
    base = live_server.url
    _log_in(page, base)
    today = timezone.localdate()

    # Beside the timeline: this month, with today's memory counted.
    calendar = page.locator("#calendar")
    expect(calendar.locator("h2")).to_have_text(today.strftime("%B %Y"))
    expect(calendar.get_by_role("link", name=f"{today.day} {today:%B %Y}: 1 memory (today)")).to_be_visible()
    # On this day: last year and three years ago.
    side = page.locator(".on-this-day-side")
    expect(side).to_contain_text("Old flat")
    expect(side).to_contain_text("Graduation day")
    expect(side).to_contain_text("3 years ago")
    _shot(page, artifacts_dir, "timeline_calendar_1280")

    # The previous month arrives in place (htmx); January 2024 has the snow.
    calendar.get_by_role("link", name="Previous month").click()
    previous = (today.replace(day=1) - timedelta(days=1)).strftime("%B %Y")
    expect(page.locator("#calendar h2")).to_have_text(previous)
    page.goto(f"{base}/calendar/?month=2024-01")
    expect(page.locator("#calendar h2")).to_have_text("January 2024")
    day = page.get_by_role("link", name="14 January 2024: 1 memory")
    expect(day).to_be_visible()
    _shot(page, artifacts_dir, "calendar_1280")
    day.click()
    expect(page.locator(".day-head h2")).to_have_text("Sunday 14 January 2024")
    expect(page.locator(".memory-card")).to_have_count(1)
    expect(page.locator(".memory-card")).to_contain_text("First snow")
    expect(page.locator("#id_occurred_at")).to_have_value("2024-01-14")
    _shot(page, artifacts_dir, "calendar_day_1280")

    page.goto(f"{base}/on-this-day/")
    expect(page.locator("h2", has_text="1 year ago")).to_be_visible()
    expect(page.locator(".memory-card", has_text="Graduation day")).to_be_visible()
    expect(page.locator(".memory-card", has_text="Harbour walk")).to_have_count(0)
    _shot(page, artifacts_dir, "on_this_day_1280")

    page.set_viewport_size(PHONE)
    page.goto(f"{base}/calendar/?month=2024-01")
    expect(page.get_by_role("link", name="14 January 2024: 1 memory")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    _shot(page, artifacts_dir, "calendar_390")
    page.goto(f"{base}/on-this-day/")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    _shot(page, artifacts_dir, "on_this_day_390")
    page.goto(f"{base}/")
    page.get_by_role("link", name="On this day").click()
    expect(page.locator("h1")).to_have_text("On this day")


def _photo_png(path) -> str:
    image = Image.new("RGB", (600, 400), (70, 130, 160))
    for x in range(200, 400):
        for y in range(100, 300):
            image.putpixel((x, y), (240, 200, 90))
    out = io.BytesIO()
    image.save(out, format="PNG")
    path.write_bytes(out.getvalue())
    return str(path)


def test_a_person_with_relationship_birthday_and_photo(
    live_server, browser_page, artifacts_dir, alice, tmp_path
):
    people = _a_little_journal(alice)
    soon = timezone.localdate() + timedelta(days=4)
    page = browser_page
    page.set_viewport_size(DESKTOP)
    base = live_server.url
    _log_in(page, base)

    page.goto(f"{base}/people/{people['anna'].pk}/edit/")
    page.fill("#id_relationship", "big sister")
    page.fill("#id_birthday_day", str(soon.day))
    page.select_option("#id_birthday_month", str(soon.month))
    page.fill("#id_birthday_year", "1988")
    page.set_input_files("#id_photo", _photo_png(tmp_path / "anna.png"))
    page.click("button:has-text('Save')")
    expect(page.locator("h1")).to_contain_text("Anna Lindqvist")
    expect(page.locator(".person-relationship")).to_have_text("big sister")
    expect(page.locator(".person-birthday")).to_contain_text(f"Birthday {soon.day} {soon:%B} 1988")
    expect(page.locator(".person-birthday")).to_contain_text("in 4 days")
    photo = page.locator(".person-ident img.avatar")
    expect(photo).to_be_visible()
    assert page.evaluate("(img) => img.naturalWidth", photo.element_handle()) == 400
    _shot(page, artifacts_dir, "person_profile_1280")

    page.goto(f"{base}/people/")
    expect(page.locator(".upcoming-birthdays")).to_contain_text("Anna Lindqvist")
    expect(page.locator(".upcoming-birthdays")).to_contain_text(f"turns {soon.year - 1988}")
    expect(page.locator("#people-table .avatar")).to_have_count(3)
    names = page.locator("#people-table td a").all_inner_texts()
    assert names == ["Self", "Anna Lindqvist", "Ben"]
    _shot(page, artifacts_dir, "people_1280")

    page.set_viewport_size(PHONE)
    page.reload()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    _shot(page, artifacts_dir, "people_390")
    page.goto(f"{base}/people/{people['anna'].pk}/")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    _shot(page, artifacts_dir, "person_profile_390")
