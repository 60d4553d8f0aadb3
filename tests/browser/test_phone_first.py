"""Phone first and installable (issue #39 item 2), in headless chromium: the header's menu with
and without JavaScript, one row at desktop widths, capture on a circle's page, a chat that
opens at its latest message, and captures typed offline kept, shown as waiting, and sent once."""

from __future__ import annotations

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from memories.models import Memory
from pwa.models import OfflineCapture
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, playwright_running, require_chromium
from tests.browser.scenario import DESKTOP, PHONE, a_lived_in_journal, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def journal(db):
    return a_lived_in_journal(chat=True)


def _in_viewport(page, selector: str) -> bool:
    return page.evaluate(
        """(selector) => {
          const box = document.querySelector(selector).getBoundingClientRect();
          return box.top >= 0 && box.bottom <= window.innerHeight && box.height > 0;
        }""",
        selector,
    )


def test_the_menu_button_opens_the_links_with_javascript(
    live_server, new_person_page, journal, artifacts_dir
):
    page = new_person_page()
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, "ana")
    button = page.get_by_role("button", name="Menu")
    expect(button).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "false")
    people = page.locator(".site-nav a", has_text="People")
    expect(people).to_be_hidden()
    header = page.locator(".site-header-inner").bounding_box()
    assert header["height"] < 70, header  # one row
    button.click()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(people).to_be_visible()
    expect(page.locator(".site-account button", has_text="Log out")).to_be_visible()
    page.screenshot(path=str(artifacts_dir / "phone_menu_open_390.png"))
    page.keyboard.press("Escape")
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(people).to_be_hidden()
    button.click()
    people.click()
    expect(page).to_have_url(f"{live_server.url}{reverse('person_list')}")


def test_the_menu_works_without_javascript(live_server, journal):
    require_chromium()
    with playwright_running() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport=PHONE, java_script_enabled=False).new_page()
            page.set_default_timeout(15_000)
            log_in(page, live_server.url, "ana")
            menu = page.locator("a.menu-toggle-link")
            expect(menu).to_be_visible()
            people = page.locator(".site-nav a", has_text="People")
            expect(people).to_be_hidden()
            menu.click()
            expect(people).to_be_visible()
            page.locator(".menu-close").click()
            expect(people).to_be_hidden()
        finally:
            browser.close()


@pytest.mark.parametrize("width", [1024, 1280, 1440, 1600])
def test_the_signed_in_header_is_one_row_clear_of_the_top(live_server, new_person_page, journal, width):
    page = new_person_page()
    page.set_viewport_size({"width": width, "height": 800})
    log_in(page, live_server.url, "ana")
    expect(page.get_by_role("button", name="Menu")).to_be_hidden()
    links = page.locator(".site-nav a, .site-account a:visible, .site-account button")
    tops = {round(box["y"]) for box in (link.bounding_box() for link in links.all()) if box}
    assert max(tops) - min(tops) <= 4, f"{width}px: links on more than one row: {sorted(tops)}"
    assert min(tops) >= 6, f"{width}px: the pills touch the window's top edge"


def test_a_circles_page_offers_capture_on_a_phone(live_server, new_person_page, journal):
    page = new_person_page()
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, "ben")
    page.goto(live_server.url + reverse("circle_detail", args=[journal.family.pk]))
    form = page.locator("#circle-add")
    expect(form).to_be_hidden()
    page.get_by_role("link", name="Add a memory to Family").click()
    expect(form).to_be_visible()
    expect(form.locator("textarea")).to_be_focused()
    form.locator("textarea").fill("Picked apples with the kids.")
    form.locator("button[type=submit]").click()
    expect(page.locator(".circle-card", has_text="Picked apples")).to_be_visible()
    assert Memory.objects.filter(owner=journal.ben, body="Picked apples with the kids.").exists()


def test_a_chat_opens_at_its_latest_message_with_the_box_in_view(live_server, new_person_page, journal):
    from agents.models import Conversation

    conversation = Conversation.objects.get(owner=journal.ana)
    page = new_person_page()
    page.set_viewport_size(PHONE)
    log_in(page, live_server.url, "ana")
    page.goto(live_server.url + reverse("agent_conversation", args=[conversation.agent_id, conversation.pk]))
    expect(page.locator("#chat-log .chat-message").last).to_be_visible()
    page.wait_for_function("() => window.scrollY > 0")
    assert _in_viewport(page, "#id_message"), "the box to write in is below the fold"
    assert page.evaluate(
        """() => {
          const messages = document.querySelectorAll('#chat-log .chat-message');
          const last = messages[messages.length - 1].getBoundingClientRect();
          return last.bottom > 0 && last.top < window.innerHeight;
        }"""
    ), "the latest message is not on screen"


CACHED_PATHS = """() => caches.keys()
  .then((names) => Promise.all(names.map((name) => caches.open(name).then((cache) => cache.keys()))))
  .then((lists) => lists.flat().map((request) => new URL(request.url).pathname))"""


def _ready_offline_capable(page, base: str) -> None:
    log_in(page, base, "ana")
    page.wait_for_function("() => navigator.serviceWorker && navigator.serviceWorker.ready.then(() => true)")
    page.evaluate("() => navigator.serviceWorker.ready")
    page.reload()  # now the worker controls the page
    page.wait_for_function("() => !!navigator.serviceWorker.controller")


def test_a_capture_typed_offline_waits_then_is_sent_once(live_server, browser_page, journal, artifacts_dir):
    page = browser_page
    page.set_viewport_size(DESKTOP)
    base = live_server.url
    _ready_offline_capable(page, base)
    before = Memory.objects.filter(owner=journal.ana).count()

    page.context.set_offline(True)
    page.fill("#id_body", "Wrote this on the ferry, no signal.")
    page.click("#quick-add button[type=submit]")
    outbox = page.locator("#outbox")
    expect(outbox).to_contain_text("Waiting to send")
    expect(outbox).to_contain_text("Wrote this on the ferry")
    expect(page.locator("#id_body")).to_have_value("")
    page.screenshot(path=str(artifacts_dir / "offline_waiting_1280.png"))
    assert Memory.objects.filter(owner=journal.ana).count() == before
    # Kept in the browser: a reload (offline: the worker's offline page) does not lose it.
    stored = page.evaluate(
        """() => new Promise((resolve) => {
          const open = indexedDB.open('keepsake', 1);
          open.onsuccess = () => {
            const request = open.result.transaction('outbox').objectStore('outbox').getAll();
            request.onsuccess = () => resolve(request.result.map((item) => item.body));
          };
        })"""
    )
    assert stored == ["Wrote this on the ferry, no signal."]

    page.context.set_offline(False)
    expect(page.locator(".memory-card", has_text="Wrote this on the ferry")).to_be_visible()
    expect(page.locator("#outbox")).to_be_hidden()
    assert Memory.objects.filter(owner=journal.ana, body="Wrote this on the ferry, no signal.").count() == 1
    assert OfflineCapture.objects.filter(owner=journal.ana).count() == 1


def test_an_answer_lost_on_the_way_back_is_retried_without_a_duplicate(live_server, browser_page, journal):
    page = browser_page
    base = live_server.url
    _ready_offline_capable(page, base)
    lost = []

    def lose_the_answer(route):
        route.fetch()  # the server saves it...
        lost.append(True)
        route.abort()  # ...and the answer never arrives

    page.route("**/offline/captures/", lose_the_answer)
    page.context.set_offline(True)
    page.fill("#id_body", "Sunset from the bridge.")
    page.click("#quick-add button[type=submit]")
    expect(page.locator("#outbox")).to_contain_text("Waiting to send")
    with page.expect_event("requestfailed"):
        page.context.set_offline(False)
    expect(page.locator("#outbox")).to_contain_text("Waiting to send")  # no answer: still waiting
    assert lost
    assert Memory.objects.filter(owner=journal.ana, body="Sunset from the bridge.").count() == 1

    page.unroute("**/offline/captures/")
    page.reload()  # sent again, with the same key
    expect(page.locator(".memory-card", has_text="Sunset from the bridge")).to_be_visible()
    expect(page.locator("#outbox")).to_be_hidden()
    assert Memory.objects.filter(owner=journal.ana, body="Sunset from the bridge.").count() == 1


def test_the_app_shell_opens_offline_and_signing_out_clears_its_caches(live_server, browser_page, journal):
    page = browser_page
    page.set_viewport_size(PHONE)
    base = live_server.url
    _ready_offline_capable(page, base)
    page.context.set_offline(True)
    page.goto(base + reverse("person_list"))
    expect(page.get_by_role("heading", name="You are offline")).to_be_visible()
    # Nothing of anyone's was kept to show here: only the shell.
    expect(page.locator("body")).not_to_contain_text("Mum")
    page.fill("#id_body", "Typed on the offline page.")
    page.click("#quick-add button[type=submit]")
    expect(page.locator("#outbox")).to_contain_text("Waiting to send")
    page.context.set_offline(False)
    expect(page.locator("#outbox")).to_be_hidden()  # sent from the offline page itself
    page.goto(base + "/")
    expect(page.locator(".memory-card", has_text="Typed on the offline page")).to_be_visible()
    assert Memory.objects.filter(owner=journal.ana, body="Typed on the offline page.").count() == 1

    cached = page.evaluate(CACHED_PATHS)
    assert cached and all(path == "/offline/" or path.startswith("/static/") for path in cached), cached
    page.get_by_role("button", name="Menu").click()
    page.locator(".site-account button", has_text="Log out").click()
    page.wait_for_url(
        lambda url: "/accounts/login" in url or url.rstrip("/").endswith(base.split("//")[1]) or True
    )
    page.wait_for_function("() => caches.keys().then((names) => names.length === 0)")
    assert page.evaluate("() => localStorage.getItem('keepsake-user')") is None
