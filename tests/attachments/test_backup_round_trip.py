"""A backup holds the photo files its rows name; restoring puts them back into the store."""

from __future__ import annotations

import zipfile
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client

from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from backups.selectors import backup_read
from backups.services import BackupError, backup_create, backup_restore
from memories.models import Memory
from tests.attachments.photos import image_bytes, upload
from tests.backups.test_backup import backup_dir, empty_database  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


def test_backup_and_restore_bring_the_photos_back(alice, backup_dir, empty_database, photo_store):  # noqa: F811
    memory = Memory.objects.create(owner=alice, body="Tulips")
    photos = attachments_add(memory=memory, images=[image_prepare(upload()), image_prepare(upload())])
    names = sorted(name for photo in photos for name in photo.stored_names())

    backup = backup_create()
    manifest = backup.manifest
    assert manifest["photos_count"] == 6 and manifest["photos_missing"] == []
    archive_path = backup.manifest_path.with_name(manifest["photos_file"])
    with zipfile.ZipFile(archive_path) as archive:
        assert sorted(archive.namelist()) == names
        assert archive.read(photos[0].original) == image_bytes()

    # The store is lost (a new machine): the restore brings the database and the files back.
    for name in names:
        (photo_store / name).unlink()
    out = StringIO()
    call_command("restore", str(backup.manifest_path), "--target", empty_database.name, stdout=out)
    assert "Photo files put back into the store: 6." in out.getvalue()
    assert all((photo_store / name).read_bytes() for name in names)
    client = Client()
    client.force_login(alice)
    assert client.get(f"/photos/{photos[0].pk}/").status_code == 200
    # Restoring again leaves the files that are there as they are.
    assert (
        backup_restore(
            backup=backup_read(backup.manifest_path), target=empty_database, force=True
        ).photos_restored
        == 0
    )


def test_a_tampered_photo_archive_is_refused(alice, backup_dir, empty_database, photo_store):  # noqa: F811
    memory = Memory.objects.create(owner=alice, body="Tulips")
    attachments_add(memory=memory, images=[image_prepare(upload())])
    backup = backup_create()
    archive_path = backup.manifest_path.with_name(backup.manifest["photos_file"])
    archive_path.write_bytes(archive_path.read_bytes() + b"tampered")
    with pytest.raises(BackupError, match="photo archive is damaged"):
        backup_restore(backup=backup, target=empty_database)
    assert Attachment.objects.count() == 1
