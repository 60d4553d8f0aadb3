"""Photos in headless Debian chromium, at 1280 and 390 px: pick (the phone's camera input), drop
and paste photos into quick capture, see them upload and land on the card, open the memory's
gallery and move through it by keyboard and by swipe."""

from __future__ import annotations

import base64

import pytest
from playwright.sync_api import expect

from attachments.models import Attachment
from memories.models import Memory
from tests.attachments.photos import image_bytes

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


def _drop(page, selector: str, name: str, data: bytes, mime: str, event: str) -> None:
    """A file dropped on, or pasted into, the element (as the browser would hand it over)."""
    page.evaluate(
        """([selector, name, data, mime, event]) => {
          const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
          const transfer = new DataTransfer();
          transfer.items.add(new File([bytes], name, { type: mime }));
          const target = document.querySelector(selector);
          const init = { bubbles: true, cancelable: true };
          const fired = event === "paste"
            ? new ClipboardEvent("paste", { ...init, clipboardData: transfer })
            : new DragEvent("drop", { ...init, dataTransfer: transfer });
          target.dispatchEvent(fired);
        }""",
        [selector, name, base64.b64encode(data).decode(), mime, event],
    )


@pytest.mark.parametrize(("viewport", "label"), [(DESKTOP, "1280"), (PHONE, "390")])
def test_capture_with_photos_and_the_gallery(
    live_server, browser_page, artifacts_dir, alice, viewport, label
):
    page = browser_page
    page.set_viewport_size(viewport)
    base = live_server.url
    _log_in(page, base)

    if viewport == PHONE:
        page.click("[data-open-capture]")  # the floating "+" opens quick capture
    picker = page.locator("#quick-add input[data-photo-input]")
    # On a phone, accept="image/*" is what offers the camera beside the library.
    expect(picker).to_have_attribute("accept", "image/*")
    expect(page.locator("#quick-add .photo-pick")).to_be_visible()
    page.fill("#id_body", "Tulips in Grandma's garden, the red ones came up first.")
    picker.set_input_files(
        [{"name": "IMG_0001.jpg", "mimeType": "image/jpeg", "buffer": image_bytes(size=(1200, 800))}]
    )
    _drop(
        page,
        "#quick-add [data-photo-drop]",
        "dropped.png",
        image_bytes("PNG", size=(600, 900)),
        "image/png",
        "drop",
    )
    _drop(
        page,
        "#id_body",
        "pasted.webp",
        image_bytes("WEBP", size=(800, 800), color=(30, 160, 60)),
        "image/webp",
        "paste",
    )
    previews = page.locator("#quick-add [data-photo-previews] li")
    expect(previews).to_have_count(3)
    expect(previews.nth(1)).to_contain_text("dropped.png")
    _shot(page, artifacts_dir, f"photos_capture_{label}")

    # Removing one preview takes it out of what will be sent.
    previews.nth(2).locator("button").click()
    expect(previews).to_have_count(2)

    page.click("#quick-add button:has-text('Save memory')")
    card = page.locator(".memory-card", has_text="Tulips in Grandma")
    expect(card.locator(".photo-strip img")).to_have_count(2)
    expect(card.locator(".photo-strip img").first).to_have_attribute("alt", "Photo 1")
    # The thumbnails really loaded (through the gated view), not broken images.
    page.wait_for_function(
        "() => [...document.querySelectorAll('.photo-strip img')]"
        ".every((img) => img.complete && img.naturalWidth > 0)"
    )
    memory = Memory.objects.get(owner=alice)
    assert [item.original_name for item in Attachment.objects.filter(memory=memory)] == [
        "IMG_0001.jpg",
        "dropped.png",
    ]
    _shot(page, artifacts_dir, f"photos_timeline_{label}")

    # The memory page's gallery: open, next by keyboard, back by swipe, close with Escape.
    page.goto(f"{base}/memories/{memory.pk}/")
    gallery = page.locator(".photo-gallery")
    expect(gallery.locator("img")).to_have_count(2)
    _shot(page, artifacts_dir, f"photos_memory_page_{label}")
    gallery.locator("a[data-gallery-item]").first.click()
    viewer = page.locator("dialog.photo-viewer")
    expect(viewer).to_be_visible()
    expect(viewer.locator(".photo-viewer-count")).to_have_text("1 / 2")
    page.wait_for_function("() => document.querySelector('dialog.photo-viewer img').naturalWidth > 0")
    page.keyboard.press("ArrowRight")
    expect(viewer.locator(".photo-viewer-count")).to_have_text("2 / 2")
    artifacts_dir.joinpath(f"photos_viewer_{label}.png").write_bytes(page.screenshot())
    page.evaluate(
        """() => {
          const viewer = document.querySelector('dialog.photo-viewer');
          const touch = (x) => new Touch({ identifier: 1, target: viewer, clientX: x, clientY: 300 });
          viewer.dispatchEvent(new TouchEvent('touchstart', { touches: [touch(100)], bubbles: true }));
          viewer.dispatchEvent(new TouchEvent('touchend', { changedTouches: [touch(300)], bubbles: true }));
        }"""
    )
    expect(viewer.locator(".photo-viewer-count")).to_have_text("1 / 2")
    page.keyboard.press("Escape")
    expect(viewer).to_be_hidden()
