"""doctor finds and fixes both halves of a half-saved photo: a file without its row, a row without files."""

from __future__ import annotations

import os
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from memories.models import Memory
from tests.attachments.photos import upload

pytestmark = pytest.mark.django_db


def doctor(*args: str) -> str:
    out = StringIO()
    try:
        call_command("doctor", *args, stdout=out, stderr=StringIO())
    except Exception as error:  # exit code 1 when something was found
        return out.getvalue() + str(error)
    return out.getvalue()


def age(path, hours: float) -> None:
    then = time.time() - hours * 3600
    os.utime(path, (then, then))


def test_doctor_finds_and_fixes_orphan_files_and_rows(alice, photo_store, django_capture_on_commit_callbacks):
    memory = Memory.objects.create(owner=alice, body="Tulips")
    kept, lost_copy, lost_original = attachments_add(
        memory=memory, images=[image_prepare(upload()) for _ in range(3)]
    )
    # A crash between writing an upload's files and committing its row left these:
    stray = photo_store / str(alice.pk) / "deadbeef" / "original.jpg"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(b"left behind")
    age(stray, 2)
    fresh = photo_store / str(alice.pk) / "cafebabe" / "original.jpg"
    fresh.parent.mkdir(parents=True)
    fresh.write_bytes(b"an upload still on its way")
    # …and these rows lost files: one its thumbnail, one its original.
    (photo_store / lost_copy.thumbnail).unlink()
    (photo_store / lost_original.original).unlink()
    for path in photo_store.rglob("*"):
        if path.is_file() and path != fresh:
            age(path, 2)

    report = doctor("-v", "2")
    assert "✗ 2 photos whose files are missing from the store" in report
    assert "✗ 1 files in the photo store that belong to no photo" in report
    assert stray.exists()  # finding changes nothing

    with django_capture_on_commit_callbacks(execute=True):
        doctor("--fix")
    assert not stray.exists()
    assert fresh.exists()  # younger than the grace period: an upload in flight
    assert (photo_store / lost_copy.thumbnail).exists()  # made again from the original
    assert not Attachment.objects.filter(pk=lost_original.pk).exists()
    assert not (photo_store / lost_original.display).exists()
    assert set(Attachment.objects.values_list("pk", flat=True)) == {kept.pk, lost_copy.pk}
    client = Client()
    client.force_login(alice)
    assert client.get(f"/photos/{lost_copy.pk}/thumbnail/").status_code == 200
    age(fresh, 2)
    fresh.unlink()
    again = doctor("-v", "2")
    assert "✓ no photos whose files are missing from the store" in again
    assert "✓ no files in the photo store that belong to no photo" in again
