"""Deleting the account deletes every photo file with it (after the deletion commits)."""

from __future__ import annotations

import pytest

from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from memories.models import Memory
from portability.services import account_delete
from tests.attachments.photos import upload
from tests.attachments.test_bad_input import stored_files

pytestmark = pytest.mark.django_db


def test_the_account_goes_with_all_its_photos(
    alice, mallory, photo_store, django_capture_on_commit_callbacks
):
    for owner in (alice, mallory):
        memory = Memory.objects.create(owner=owner, body="Tulips")
        attachments_add(memory=memory, images=[image_prepare(upload()), image_prepare(upload())])
    assert len(stored_files(photo_store)) == 12
    with django_capture_on_commit_callbacks(execute=True):
        account_delete(user=alice, password="correct horse battery")
    assert not Attachment.objects.filter(owner_id=alice.pk).exists()
    left = stored_files(photo_store)
    assert len(left) == 6
    assert all(path.relative_to(photo_store).parts[0] == str(mallory.pk) for path in left)
