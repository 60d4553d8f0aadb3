"""Where photos live: a storage of their own, never at a URL of the store's.

`attachment_storage()` is Django's `storages["attachments"]` (config/settings.py): the
filesystem under MEDIA_ROOT/attachments by default, an S3-compatible bucket as the
production option. Whatever the backend, nothing here hands out a URL: every byte is
streamed by attachments.views after the gate has said yes, so a bucket stays private
and a path on disk is never a way in.
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.utils.functional import cached_property


class AttachmentFileSystemStorage(FileSystemStorage):
    """Files under MEDIA_ROOT/attachments (MEDIA_ROOT may change in tests: read each time it does)."""

    @cached_property
    def base_location(self) -> str:
        return self._value_or_setting(self._location, os.path.join(settings.MEDIA_ROOT, "attachments"))

    def url(self, name: str | None) -> str:
        raise NotImplementedError("Photos have no public URL: attachments.views serves them.")


def attachment_storage() -> Storage:
    return storages["attachments"]
