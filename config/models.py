"""What many of the project's tables share: a random UUID key and an owning account."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class UUIDModel(models.Model):
    """A table whose rows are named by a random UUID, so an id tells nothing and cannot be guessed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)

    class Meta:
        abstract = True


def owner_key(related_name: str = "+") -> models.ForeignKey:
    """The account a row belongs to: deleting the account deletes the row with it."""
    return models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name=related_name)
