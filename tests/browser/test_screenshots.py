"""Every main page at 1280 and 390 px, as Ana, Ben and a visitor: nothing wider than the
window, the header one row, and a screenshot of each (tests/artifacts/screens/, and
docs/screenshots/ with KEEPSAKE_SCREENSHOTS=docs, as palette PNGs small enough to commit)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.urls import reverse
from PIL import Image

from agents.models import Conversation
from tests.browser.scenario import DESKTOP, PHONE, a_lived_in_journal, log_in, too_wide

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _save(page, folder: Path, name: str) -> None:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if folder == DOCS:
        # Small enough to commit: a palette PNG, at most 2,400 px tall.
        with Image.open(path) as image:
            image = image.convert("RGB")
            if image.height > 2400:
                image = image.crop((0, 0, image.width, 2400))
            image.quantize(colors=128).save(path, optimize=True)


def _pages(journal) -> dict[str, list[tuple[str, str]]]:
    conversation = Conversation.objects.filter(owner=journal.ana).first()
    family = journal.family.pk
    ana_pages = [
        ("timeline", "/"),
        ("search", "/search/?q=speech"),
        ("memory", reverse("memory_detail", args=[journal.sixtieth.pk])),
        ("memory-edit", reverse("memory_edit", args=[journal.sixtieth.pk])),
        ("people", reverse("person_list")),
        ("person", reverse("person_detail", args=[journal.ben_person.pk])),
        ("person-unlinked", reverse("person_detail", args=[journal.mum.pk])),
        ("circle-memory-share", reverse("memory_detail", args=[journal.run.pk])),
        ("universe", reverse("universe")),
        ("circles", reverse("circle_list")),
        ("circle", reverse("circle_detail", args=[family])),
        ("circle-chat", reverse("circle_chat", args=[family])),
        ("agents", reverse("agent_list")),
        ("chat", reverse("agent_conversation", args=[conversation.agent_id, conversation.pk])),
        ("inbox", reverse("inbox")),
        ("settings", reverse("settings")),
        ("calendar", reverse("memory_calendar")),
    ]
    ben_pages = [
        ("circle", reverse("circle_detail", args=[family])),
        ("my-consents", reverse("my_consents")),
        ("inbox", reverse("inbox")),
    ]
    return {"ana": ana_pages, "ben": ben_pages}


def test_every_main_page_at_1280_and_390(live_server, new_person_page, artifacts_dir):
    journal = a_lived_in_journal(chat=True)
    folder = DOCS if os.environ.get("KEEPSAKE_SCREENSHOTS") == "docs" else artifacts_dir / "screens"
    folder.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    problems = []

    visitor = new_person_page()
    for name, url in (("login", "/accounts/login/"), ("signup", "/accounts/signup/")):
        for width, viewport in (("1280", DESKTOP), ("390", PHONE)):
            visitor.set_viewport_size(viewport)
            visitor.goto(base + url)
            problems += [f"{name} {width}: {item}" for item in too_wide(visitor)]
            _save(visitor, folder, f"{name}-{width}")

    for username, pages in _pages(journal).items():
        page = new_person_page()
        log_in(page, base, username)
        for name, url in pages:
            for width, viewport in (("1280", DESKTOP), ("390", PHONE)):
                page.set_viewport_size(viewport)
                page.goto(base + url)
                page.wait_for_load_state("networkidle")
                problems += [f"{username} {name} {width}: {item}" for item in too_wide(page)]
                header = page.locator(".site-header-inner").bounding_box()
                if header["height"] > 70:
                    problems.append(f"{username} {name} {width}: header {header['height']}px tall")
                _save(page, folder, f"{username}-{name}-{width}")
    assert not problems, "\n".join(problems)
