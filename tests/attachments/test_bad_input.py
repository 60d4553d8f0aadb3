"""Bad photos get a clear refusal and leave nothing behind: no file without its row nor row without files."""

from __future__ import annotations

import struct
import zlib

import pytest
from django.core.exceptions import ValidationError

from attachments import services
from attachments.images import NOT_A_PHOTO, clean_original_name, image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from memories.models import Memory
from tests.attachments.photos import image_bytes, upload

pytestmark = pytest.mark.django_db


def stored_files(root) -> list:
    return [path for path in root.rglob("*") if path.is_file()] if root.exists() else []


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims width × height pixels with a few bytes of data: a decompression bomb's header."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    "data",
    [
        b"%PDF-1.7\n1 0 obj<<>>endobj\n",
        b"just some text that says it is a jpeg",
        image_bytes("GIF", metadata=False),
        image_bytes("BMP", metadata=False),
        image_bytes()[:400],  # truncated halfway
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 200,  # a PNG signature and garbage
        image_bytes()[:200] + b"\xff" * 600 + image_bytes()[800:],  # corrupt in the middle
    ],
    ids=["pdf", "text", "gif", "bmp", "truncated", "png-garbage", "corrupt"],
)
def test_what_is_not_a_readable_photo_is_refused_by_its_content(data):
    with pytest.raises(ValidationError) as refused:
        image_prepare(upload(data, name="holiday.jpg", content_type="image/jpeg"))
    assert refused.value.messages == [NOT_A_PHOTO]


def test_an_empty_file_is_refused():
    with pytest.raises(ValidationError, match="empty"):
        image_prepare(upload(b""))


def test_oversize_is_refused_before_decoding(settings):
    settings.ATTACHMENT_MAX_BYTES = 1024 * 1024
    big = image_bytes("PNG", size=(1200, 1200), metadata=False, color=(1, 2, 3))
    big += b"\x00" * (1024 * 1024)  # trailing bytes past the limit
    with pytest.raises(ValidationError, match="at most 1 MB"):
        image_prepare(upload(big))


def test_too_many_pixels_is_refused_from_the_header(settings):
    settings.ATTACHMENT_MAX_PIXELS = 1_000_000
    with pytest.raises(ValidationError, match="too many pixels"):
        image_prepare(upload(image_bytes(size=(1200, 900), metadata=False)))


@pytest.mark.parametrize("side", [20_000, 60_000])
def test_a_decompression_bomb_is_refused_without_decoding_it(side):
    # 400 million and 3.6 billion pixels claimed by a few hundred bytes.
    with pytest.raises(ValidationError, match="too many pixels"):
        image_prepare(upload(png_header_only(side, side), name="bomb.png"))


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("../../etc/passwd.jpg", "passwd.jpg"),
        ("C:\\Users\\me\\Pictures\\IMG_1.HEIC", "IMG_1.HEIC"),
        ("/absolute/path/photo.png", "photo.png"),
        ("..", "photo"),
        ("evil\x00name\n.jpg", "evilname.jpg"),
        ("", "photo"),
    ],
)
def test_a_name_keeps_only_its_last_part(name, kept):
    assert clean_original_name(name) == kept


def test_a_name_with_path_parts_never_names_a_stored_file(alice, photo_store):
    memory = Memory.objects.create(owner=alice, body="x")
    [attachment] = attachments_add(
        memory=memory, images=[image_prepare(upload(name="../../../../tmp/evil.jpg"))]
    )
    assert attachment.original_name == "evil.jpg"
    files = stored_files(photo_store)
    assert len(files) == 3
    for path in files:
        assert path.resolve().is_relative_to(photo_store.resolve())
        assert "evil" not in str(path)
        assert path.parent.parent.name == str(alice.pk)


def test_too_many_photos_on_one_memory_stores_none(alice, photo_store, settings):
    settings.ATTACHMENTS_PER_MEMORY = 2
    memory = Memory.objects.create(owner=alice, body="x")
    attachments_add(memory=memory, images=[image_prepare(upload())])
    with pytest.raises(ValidationError, match="at most 2 photos"):
        attachments_add(memory=memory, images=[image_prepare(upload()), image_prepare(upload())])
    assert Attachment.objects.filter(memory=memory).count() == 1
    assert len(stored_files(photo_store)) == 3


def test_a_storage_failure_halfway_leaves_no_file_and_no_row(alice, photo_store, monkeypatch):
    memory = Memory.objects.create(owner=alice, body="x")
    storage = services.attachment_storage()
    real_save, calls = storage.save, []

    def failing_save(name, content, **kwargs):
        calls.append(name)
        if len(calls) == 5:  # the second photo's display copy: the disk is full
            raise OSError("No space left on device")
        return real_save(name, content, **kwargs)

    monkeypatch.setattr(storage, "save", failing_save)
    with pytest.raises(OSError):
        attachments_add(memory=memory, images=[image_prepare(upload()), image_prepare(upload())])
    assert not Attachment.objects.filter(memory=memory).exists()
    assert stored_files(photo_store) == []


def test_a_database_failure_after_the_files_leaves_no_file(alice, photo_store, monkeypatch):
    memory = Memory.objects.create(owner=alice, body="x")
    real_create = Attachment.objects.create
    created = []

    def failing_create(**kwargs):
        if created:
            raise RuntimeError("connection lost")
        created.append(real_create(**kwargs))
        return created[-1]

    monkeypatch.setattr(Attachment.objects, "create", failing_create)
    with pytest.raises(RuntimeError):
        attachments_add(memory=memory, images=[image_prepare(upload()), image_prepare(upload())])
    assert not Attachment.objects.filter(memory=memory).exists()
    assert stored_files(photo_store) == []
