from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in the test thread; Django would
# otherwise refuse the test's own database calls made while that loop exists.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"
DESKTOP = {"width": 1280, "height": 900}


@contextlib.contextmanager
def playwright_running():
    """Playwright's sync API, for one test; the database sessions the test opened meanwhile closed at the end.

    While Playwright's event loop runs in the test thread, Django keeps that thread's
    connections apart from its usual ones (asgiref's Local: a context variable while a
    loop runs), so the test's own ORM calls open a session that nothing else closes:
    one was found still on the test database at the end of the run, named by its test.
    """
    from django.db import connections
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        try:
            yield playwright
        finally:
            connections.close_all()  # the ones opened while the loop ran


def require_chromium(path: Path = CHROMIUM) -> None:
    """Missing chromium fails the browser tests loudly: never a silent skip."""
    if not path.exists():
        pytest.fail(
            f"Browser tests need Debian's chromium at {path}: run `apt-get install -y chromium` "
            "(as root; `make test` does it for you when run as root)."
        )


@pytest.fixture
def browser_page():
    """A headless Debian chromium page."""
    require_chromium()
    with playwright_running() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport=DESKTOP)
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()


@pytest.fixture
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture
def new_person_page() -> Iterator[Callable]:
    """One chromium; each call opens a page in its own context (own cookies: one person each)."""
    require_chromium()
    with playwright_running() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)

        def open_page():
            page = browser.new_context(viewport=DESKTOP).new_page()
            page.set_default_timeout(15_000)
            return page

        try:
            yield open_page
        finally:
            browser.close()
