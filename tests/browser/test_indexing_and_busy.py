"""In chromium: an import's indexing progress, the timeline's note, and the busy state of slow forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from memories.models import Memory
from memories.services import memory_embed_batch
from portability.models import ImportJob
from portability.services import import_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIXTURE = Path(__file__).resolve().parent.parent / "portability" / "fixtures" / "dayone_sample.json"
WIDTHS = (1280, 390)


def _sign_in(page, client, live_server, user) -> None:
    client.force_login(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )


def test_import_page_shows_indexing_until_done_and_the_timeline_note_comes_and_goes(
    live_server, browser_page, artifacts_dir, alice, client
):
    page = browser_page
    _sign_in(page, client, live_server, alice)
    page.goto(f"{live_server.url}/settings/")
    page.set_input_files("#id_file", str(FIXTURE))
    page.click("button:has-text('Import')")
    job = ImportJob.objects.get(owner=alice)
    import_run(job_id=job.pk)  # no worker in this test: the job's work is done here
    progress = page.locator("#import-progress")
    expect(progress).to_contain_text("Indexing 0 of 3 imported memories", timeout=10_000)
    expect(progress).to_have_attribute("hx-trigger", "every 3s")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        artifacts_dir.joinpath(f"import-indexing-{width}.png").write_bytes(page.screenshot(full_page=True))

    page.goto(f"{live_server.url}/")
    note = page.locator(".indexing-note")
    expect(note).to_have_text("3 memories are still being indexed — search finds them by words meanwhile.")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        artifacts_dir.joinpath(f"timeline-indexing-note-{width}.png").write_bytes(page.screenshot())

    page.goto(f"{live_server.url}/settings/imports/{job.pk}/")
    memory_embed_batch(memory_ids=list(Memory.objects.filter(owner=alice).values_list("pk", flat=True)))
    # The page's own poll picks it up.
    expect(progress).to_contain_text("All 3 imported memories are indexed", timeout=15_000)
    expect(progress).not_to_have_attribute("hx-trigger", "every 3s")
    page.goto(f"{live_server.url}/")
    expect(page.locator(".indexing-note")).to_have_count(0)


def test_a_slow_form_shows_a_spinner_after_300_ms_and_a_quick_one_shows_nothing(
    live_server, browser_page, artifacts_dir, alice, client
):
    page = browser_page
    _sign_in(page, client, live_server, alice)
    page.goto(f"{live_server.url}/")
    # htmx puts .htmx-request on the form for as long as its request runs.
    page.evaluate("document.querySelector('#quick-add').classList.add('htmx-request')")
    spinner = "getComputedStyle(document.querySelector('#quick-add button.button[type=submit]'), '::after')"
    assert page.evaluate(f"{spinner}.opacity") == "0"  # not yet: quick answers show nothing
    page.wait_for_timeout(600)
    assert page.evaluate(f"{spinner}.opacity") == "1"
    assert page.evaluate(f"{spinner}.borderTopStyle") == "solid"
    # Only on the form's own buttons, not on "+ Add another person".
    other = "getComputedStyle(document.querySelector('#quick-add .link-button'), '::after')"
    assert page.evaluate(f"{other}.content") == "none"
    artifacts_dir.joinpath("busy-quick-add.png").write_bytes(
        page.locator("#quick-add button.button[type=submit]").screenshot()
    )
    page.evaluate("document.querySelector('#quick-add').classList.remove('htmx-request')")
    assert page.evaluate(f"{spinner}.content") == "none"
