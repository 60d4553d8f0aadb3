"""Writing photos: all or nothing, and no file without its row or row without its files.

The files are written first, then the rows, inside one transaction; any failure on the
way (a refused count, a storage error, a database error) deletes every file this call
wrote before the error goes on up, so nothing is left half-saved. Deleting goes the
other way: the rows go in the caller's transaction and the files only once it commits
(attachments/signals.py), so a rolled-back delete keeps both. A crash between a write
and its commit can still leave a file with no row: `manage.py doctor` finds and
removes those (attachments.maintenance).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import transaction

from attachments.images import PreparedImage
from attachments.models import Attachment
from attachments.storage import attachment_storage
from memories.models import Memory


def too_many_message() -> str:
    return f"A memory can hold at most {settings.ATTACHMENTS_PER_MEMORY} photos."


def _delete_files(names: Sequence[str]) -> None:
    storage = attachment_storage()
    for name in names:
        storage.delete(name)


def attachments_add(
    *, memory: Memory, images: Sequence[PreparedImage], captions: Sequence[str] = ()
) -> list[Attachment]:
    """Store checked photos (attachments.images.image_prepare) on the memory: every one or none."""
    if not images:
        return []
    storage = attachment_storage()
    written: list[str] = []
    try:
        with transaction.atomic():
            # The count is checked under the memory's lock: two uploads at once cannot both pass it.
            locked = Memory.objects.select_for_update().get(pk=memory.pk)
            position = Attachment.objects.filter(memory=locked).count()
            if position + len(images) > settings.ATTACHMENTS_PER_MEMORY:
                raise ValidationError(too_many_message(), code="too_many")
            created = []
            for offset, image in enumerate(images):
                folder = f"{locked.owner_id}/{secrets.token_hex(16)}"
                names = {}
                for part, content, extension in (
                    ("original", image.original, image.extension),
                    ("display", image.display, "jpg"),
                    ("thumbnail", image.thumbnail, "jpg"),
                ):
                    name = storage.save(f"{folder}/{part}.{extension}", ContentFile(content))
                    written.append(name)
                    names[part] = name
                caption = captions[offset] if offset < len(captions) else ""
                created.append(
                    Attachment.objects.create(
                        memory=locked,
                        owner_id=locked.owner_id,
                        position=position + offset,
                        media_type=image.media_type,
                        original_name=image.original_name,
                        caption=(caption or "").strip()[:500],
                        width=image.width,
                        height=image.height,
                        byte_size=len(image.original),
                        sha256=image.sha256,
                        **names,
                    )
                )
    except BaseException:
        _delete_files(written)
        raise
    return created


def attachment_set_caption(*, attachment: Attachment, caption: str) -> Attachment:
    attachment.caption = (caption or "").strip()[:500]
    attachment.save(update_fields=["caption"])
    return attachment


def attachment_delete(*, attachment: Attachment) -> None:
    attachment.delete()  # its files go once this commits (attachments/signals.py)
