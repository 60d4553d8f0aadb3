"""The Settings page in headless chromium: upload a Day One file, watch the progress poll to the end."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from portability.models import ImportJob
from portability.services import import_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIXTURE = Path(__file__).parent / "fixtures" / "dayone_sample.json"


def test_upload_shows_progress_until_done_and_the_job_is_listed(
    live_server,
    browser_page,
    artifacts_dir,
    alice,
    client,
):
    page = browser_page
    client.force_login(alice)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.goto(f"{live_server.url}/settings/")
    expect(page.locator("h1")).to_have_text("Settings")

    # A malformed file: the error is shown on the form and nothing is queued.
    page.set_input_files(
        "#id_file", files=[{"name": "diary.json", "mimeType": "application/json", "buffer": b"Dear diary,"}]
    )
    page.click("button:has-text('Import')")
    expect(page.locator("#import")).to_contain_text("Nothing was imported. The file is not valid JSON")
    assert not ImportJob.objects.exists()

    page.set_input_files("#id_file", str(FIXTURE))
    page.click("button:has-text('Import')")
    expect(page.locator("#import-progress")).to_contain_text("0 of 5 items")
    # No worker runs in this test: do the job's work here while the page polls.
    job = ImportJob.objects.get(owner=alice)
    import_run(job_id=job.pk)
    expect(page.locator("#import-progress")).to_contain_text("5 of 5 items (100%)", timeout=10_000)
    expect(page.locator("#import-progress")).to_contain_text("3 imported, 2 skipped")
    expect(page.locator("#import-progress")).not_to_have_attribute("hx-trigger", "every 1s")
    artifacts_dir.joinpath("import-done.png").write_bytes(page.screenshot(full_page=True))

    page.click("text=Settings")
    expect(page.locator("#import-list")).to_contain_text("dayone_sample.json")
    expect(page.locator("#import-list")).to_contain_text("Done")
    artifacts_dir.joinpath("settings.png").write_bytes(page.screenshot(full_page=True))
