"""Saving a capture that waited in the browser while it was offline: once, whatever the retries."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from memories.mentions import mentions_find
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.selectors import person_list
from pwa.models import OfflineCapture

CAPTURE_KEY = re.compile(r"^[A-Za-z0-9-]{8,64}$")


@dataclass
class UnknownMentions(Exception):
    """@names that are nobody in the journal yet: the owner decides in the form, never the queue."""

    names: list[str]


@dataclass(frozen=True)
class SavedCapture:
    memory: Memory
    created: bool  # False: an earlier try with this key saved it


def offline_capture_save(
    *, owner: AbstractBaseUser, key: str, body: str, typed_at: datetime | None = None
) -> SavedCapture:
    """Save the capture once per (owner, key): a retry gets the memory the first try saved.

    As quick capture does, people mentioned with @ join it as subjects, so their consent
    gates it. A name that is nobody yet is not decided here (quick capture asks first):
    UnknownMentions, nothing written. `typed_at` (when it was typed) is its moment, never
    later than now.
    """
    if not CAPTURE_KEY.match(key or ""):
        raise ValidationError({"key": "A capture key is 8 to 64 letters, digits or dashes."})
    earlier = OfflineCapture.objects.filter(owner=owner, key=key).select_related("memory").first()
    if earlier is not None:
        return SavedCapture(memory=earlier.memory, created=False)
    mentions = mentions_find(text=body, people=person_list(owner=owner))
    if mentions.unknown:
        raise UnknownMentions(mentions.unknown)
    now = timezone.now()
    occurred_at = min(typed_at, now) if typed_at is not None else now
    try:
        with transaction.atomic():
            memory = memory_create(
                owner=owner,
                body=body,
                occurred_at=occurred_at,
                participants=[ParticipantSpec(person=person) for person in mentions.known],
            )
            OfflineCapture.objects.create(owner=owner, key=key, memory=memory)
    except IntegrityError:
        # Two tries at once: the other one's row won (unique owner + key) and this
        # transaction, memory included, was rolled back.
        earlier = OfflineCapture.objects.select_related("memory").get(owner=owner, key=key)
        return SavedCapture(memory=earlier.memory, created=False)
    return SavedCapture(memory=memory, created=True)
