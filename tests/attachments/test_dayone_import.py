"""A Day One export with photos: each entry's photos become the memory's, checked like uploads."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from attachments.models import Attachment
from circles.services import memory_share
from memories.models import Memory
from portability.services import import_start
from tests.attachments.photos import assert_clean, image_bytes
from tests.portability.conftest import run_import

pytestmark = pytest.mark.django_db


def dayone_zip(entries: list[dict], photos: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("Journal.json", json.dumps({"metadata": {"version": "1.0"}, "entries": entries}))
        for name, data in photos.items():
            archive.writestr(f"photos/{name}", data)
    return buffer.getvalue()


def photo_ref(data: bytes, identifier: str, order: int, kind: str = "jpeg") -> tuple[dict, str]:
    md5 = hashlib.md5(data).hexdigest()  # Day One names photos by their MD5
    return {"identifier": identifier, "md5": md5, "type": kind, "orderInEntry": order}, f"{md5}.{kind}"


def test_dayone_photos_are_imported_with_their_entries(alice, bob, family):
    garden, heic, lone, broken = (
        image_bytes(size=(300, 200)),
        image_bytes("HEIF", size=(120, 160)),
        image_bytes("PNG", size=(90, 90), metadata=False),
        image_bytes()[:200],
    )
    garden_ref, garden_name = photo_ref(garden, "AAA", 0)
    heic_ref, heic_name = photo_ref(heic, "BBB", 1, "heic")
    lone_ref, lone_name = photo_ref(lone, "CCC", 0, "png")
    broken_ref, broken_name = photo_ref(broken, "DDD", 0)
    missing_ref = {"identifier": "EEE", "md5": "f" * 32, "type": "jpeg", "orderInEntry": 1}
    entries = [
        {
            "uuid": "1",
            "creationDate": "2024-05-01T10:00:00Z",
            "text": "# Garden\n![](dayone-moment://AAA)\nThe tulips came up.\n![](dayone-moment://BBB)",
            "photos": [heic_ref, garden_ref],
        },
        {"uuid": "2", "creationDate": "2024-05-02T10:00:00Z", "text": "", "photos": [lone_ref]},
        {
            "uuid": "3",
            "creationDate": "2024-05-03T10:00:00Z",
            "text": "Rain all day.",
            "photos": [broken_ref, missing_ref],
        },
        {"uuid": "4", "creationDate": "2024-05-04T10:00:00Z", "text": "", "photos": [broken_ref]},
    ]
    content = dayone_zip(
        entries, {garden_name: garden, heic_name: heic, lone_name: lone, broken_name: broken}
    )
    job = run_import(alice, filename="Journal.zip", content=content)
    assert (job.total, job.imported, job.skipped_count) == (4, 3, 1)

    garden_memory = Memory.objects.get(owner=alice, title="Garden")
    assert garden_memory.body == "The tulips came up."  # Day One's photo markers are not text
    photos = list(garden_memory.attachments.all())
    assert [photo.media_type for photo in photos] == ["image/jpeg", "image/heic"]  # orderInEntry
    assert photos[0].original_name == garden_name
    lone_memory = Memory.objects.get(owner=alice, occurred_at__date="2024-05-02")
    assert lone_memory.body == "Photos from Day One."
    assert lone_memory.attachments.count() == 1
    rain = Memory.objects.get(owner=alice, body="Rain all day.")
    assert not rain.attachments.exists()
    notes = " ".join(entry["reason"] for entry in job.skipped)
    assert f"{broken_name}: That file is not a photo" in notes and "not in the archive" in notes
    assert "no photo that could be read" in notes
    assert Attachment.objects.filter(owner=alice).count() == 3

    # Imported photos are served like any other: to a member, stripped of the camera's metadata.
    garden_memory.sensitivity = "public"
    garden_memory.save(update_fields=["sensitivity"])
    memory_share(memory=garden_memory, circle=family, by=alice)
    client = Client()
    client.force_login(bob)
    served = client.get(f"/photos/{photos[0].pk}/")
    assert served.status_code == 200
    assert_clean(b"".join(served.streaming_content), original_name=garden_name)


def test_photos_bigger_than_the_import_limit_are_refused_before_inflating(alice, settings):
    settings.KEEPSAKE_IMPORT_MAX_BYTES = 2000
    content = dayone_zip(
        [{"uuid": "1", "creationDate": "2024-05-01T10:00:00Z", "text": "x"}],
        {f"{'a' * 32}.jpeg": b"\0" * 5000},  # compresses to almost nothing
    )
    with pytest.raises(ValidationError, match="photos inside the ZIP are larger"):
        import_start(owner=alice, filename="Journal.zip", content=content)
