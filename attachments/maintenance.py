"""What `manage.py doctor` checks of photos: no file without its row, no row without its files.

Found read-only; fixed by removing what is left of the other half. A file younger than
ORPHAN_GRACE is never taken for an orphan: an upload writes its files a moment before
its row commits. A row whose viewing copies are missing but whose original is there
gets them made again from the original; a row whose original is gone is removed (its
memory stays, without that photo).
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.core.files.base import ContentFile
from django.utils import timezone

from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.storage import attachment_storage

ORPHAN_GRACE = timedelta(hours=1)


def _stored_files() -> list[str]:
    storage = attachment_storage()
    names: list[str] = []
    pending = [""]
    while pending:
        folder = pending.pop()
        try:
            folders, files = storage.listdir(folder)
        except FileNotFoundError:
            continue
        names += [f"{folder}/{name}" if folder else name for name in files]
        pending += [f"{folder}/{name}" if folder else name for name in folders]
    return sorted(names)


def find_orphan_photo_files() -> list[str]:
    storage = attachment_storage()
    known: set[str] = set()
    for row in Attachment.objects.values_list("original", "display", "thumbnail"):
        known.update(row)
    cutoff = timezone.now() - ORPHAN_GRACE
    orphans = []
    for name in _stored_files():
        if name in known:
            continue
        try:
            if storage.get_modified_time(name) > cutoff:
                continue
        except (FileNotFoundError, NotImplementedError):
            pass
        orphans.append(name)
    return orphans


def fix_orphan_photo_files(names: list[str]) -> None:
    storage = attachment_storage()
    known: set[str] = set()
    for row in Attachment.objects.values_list("original", "display", "thumbnail"):
        known.update(row)
    for name in names:
        if name not in known:  # a row may have claimed it since it was found
            storage.delete(name)


def find_photo_rows_without_files() -> list[uuid.UUID]:
    storage = attachment_storage()
    return [
        attachment.pk
        for attachment in Attachment.objects.only("original", "display", "thumbnail").order_by("pk")
        if not all(storage.exists(name) for name in attachment.stored_names())
    ]


def fix_photo_rows_without_files(attachment_ids: list[uuid.UUID]) -> None:
    storage = attachment_storage()
    for attachment in Attachment.objects.filter(pk__in=attachment_ids):
        if not storage.exists(attachment.original):
            attachment.delete()  # what is left of its files goes after commit (attachments/signals.py)
            continue
        with storage.open(attachment.original, "rb") as original:
            prepared = image_prepare(ContentFile(original.read()), name=attachment.original_name)
        for part in ("display", "thumbnail"):
            name = getattr(attachment, part)
            if not storage.exists(name):
                saved = storage.save(name, ContentFile(getattr(prepared, part)))
                if saved != name:
                    Attachment.objects.filter(pk=attachment.pk).update(**{part: saved})
