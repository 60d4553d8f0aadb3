"""Photos in memories. An attachment belongs to one memory and shares its fate.

Three files per photo, all in the attachments storage (attachments/storage.py) under a
random folder of the owner's: the bytes as they were uploaded (`original`, for the owner
alone: it may carry the camera's EXIF, GPS position and XMP), a re-encoded copy for
viewing (`display`: upright, at most 2560 px, a fresh JPEG with no metadata) and a
thumbnail made the same way. Anyone but the owner is only ever given `display` or
`thumbnail`, by attachments.views, after memories.gate says they may see the memory.
"""

from __future__ import annotations

from django.db import models

from config.models import UUIDModel, owner_key


class Attachment(UUIDModel):
    memory = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="attachments")
    owner = owner_key("attachments")
    position = models.PositiveSmallIntegerField(default=0)
    # Of the original, as read from its bytes (never the client's word): image/jpeg, image/png, …
    media_type = models.CharField(max_length=40)
    # Storage names. Random folders: a name tells nothing and is never a way in.
    original = models.CharField(max_length=300)
    display = models.CharField(max_length=300)
    thumbnail = models.CharField(max_length=300)
    # The uploaded file's own name (its last path part), shown to the owner only.
    original_name = models.CharField(max_length=255, blank=True)
    # The owner's words; the image's alt text, and what an agent may be told of it (never the image).
    caption = models.CharField(max_length=500, blank=True)
    # Of the upright display copy.
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    byte_size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position", "created_at"]
        indexes = [models.Index(fields=["memory", "position"]), models.Index(fields=["owner"])]

    def __str__(self) -> str:
        return self.caption or f"Photo {self.position + 1}"

    @property
    def alt_text(self) -> str:
        return self.caption or f"Photo {self.position + 1}"

    def stored_names(self) -> list[str]:
        return [name for name in (self.original, self.display, self.thumbnail) if name]
