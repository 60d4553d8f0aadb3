"""Export and import with photos: the export ZIP holds the originals and imports back with them."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from accounts.services import user_signup
from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from memories.models import Memory
from portability.selectors import export_json, export_markdown_zip
from tests.attachments.photos import SECRET_NAME, image_bytes, upload
from tests.portability.conftest import run_import

pytestmark = pytest.mark.django_db


def test_the_export_zip_carries_the_photos_and_imports_back_with_them(alice):
    garden = Memory.objects.create(owner=alice, title="Garden", body="Tulips", kind="knowledge")
    attachments_add(
        memory=garden,
        images=[
            image_prepare(upload(name=SECRET_NAME)),
            image_prepare(upload(image_bytes("PNG"), name="b.png")),
        ],
        captions=["Red tulips", ""],
    )
    Memory.objects.create(owner=alice, body="No photos here", kind="knowledge")
    document = export_json(owner=alice)
    rows = document["records"]["attachments.attachment"]
    assert [(row["caption"], row["original_name"]) for row in rows] == [
        ("Red tulips", SECRET_NAME),
        ("", "b.png"),
    ]
    archive = zipfile.ZipFile(io.BytesIO(export_markdown_zip(owner=alice)))
    photo_names = sorted(name for name in archive.namelist() if name.startswith("keepsake-memories/photos/"))
    assert len(photo_names) == 2
    originals = {archive.read(name) for name in photo_names}
    assert image_bytes() in originals  # the owner's own original, as uploaded
    markdown = next(
        archive.read(name).decode()
        for name in archive.namelist()
        if name.endswith(".md") and "garden" in name
    )
    assert "![Red tulips](photos/" in markdown
    assert json.loads(archive.read("keepsake-export.json"))["format"] == "keepsake-export"

    bea = user_signup(username="bea", password="correct horse battery")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as copy:
        for name in archive.namelist():
            copy.writestr(name, archive.read(name))
    job = run_import(bea, filename="keepsake.zip", content=buffer.getvalue())
    assert job.format == "keepsake" and job.skipped_count == 0
    imported = Memory.objects.get(owner=bea, title="Garden")
    photos = list(Attachment.objects.filter(memory=imported))
    assert [(photo.caption, photo.original_name, photo.media_type) for photo in photos] == [
        ("Red tulips", SECRET_NAME, "image/jpeg"),
        ("", "b.png", "image/png"),
    ]
    assert photos[0].sha256 == Attachment.objects.filter(memory=garden).first().sha256
    assert not Attachment.objects.filter(memory__owner=bea, memory__body="No photos here").exists()


def test_a_bare_json_export_imports_without_photos(alice):
    garden = Memory.objects.create(owner=alice, title="Garden", body="Tulips", kind="knowledge")
    attachments_add(memory=garden, images=[image_prepare(upload())])
    bea = user_signup(username="bea", password="correct horse battery")
    job = run_import(bea, filename="keepsake.json", content=json.dumps(export_json(owner=alice)).encode())
    assert job.imported >= 1
    assert Memory.objects.filter(owner=bea, title="Garden").exists()
    assert not Attachment.objects.filter(owner=bea).exists()
