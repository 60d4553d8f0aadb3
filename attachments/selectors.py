"""Reading photos. Who may receive one is the gate's answer for its memory, never decided here."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.db.models import QuerySet
from django.http import Http404

from attachments.models import Attachment
from memories.gate import person_may_see_memory


def attachments_of_memory(*, memory_id: uuid.UUID) -> QuerySet[Attachment]:
    """A memory's photos in their order. The caller has already been allowed to see the memory."""
    return Attachment.objects.filter(memory_id=memory_id).order_by("position", "created_at")


def attachment_for_reader(*, attachment_id: uuid.UUID, reader: AbstractBaseUser) -> tuple[Attachment, bool]:
    """The attachment and whether the reader owns it; 404 unless the gate lets the reader see its memory.

    An attachment the reader may not see answers exactly like one that does not exist.
    """
    attachment = Attachment.objects.filter(pk=attachment_id).first()
    if attachment is None or not person_may_see_memory(attachment.memory_id, reader.pk):
        raise Http404("No such photo.")
    return attachment, attachment.owner_id == reader.pk


def attachment_get_for_owner(*, owner: AbstractBaseUser, attachment_id: uuid.UUID) -> Attachment:
    attachment = Attachment.objects.filter(pk=attachment_id, owner=owner).first()
    if attachment is None:
        raise Http404("No such photo.")
    return attachment


def attachment_counts(*, memory_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, int]:
    """How many photos each memory has: for surfaces that may only say how many (agents).

    `memory_ids` must already be the gate's answer for that reader: a count is derived
    from the memory and is told only of a memory the reader may see.
    """
    memory_ids = list(memory_ids)
    if not memory_ids:
        return {}
    # Plain SQL: on every search result list and API page, the ORM's GROUP BY statement
    # cost ~1.5 ms of Python to build, far more than PostgreSQL took to answer it.
    with connection.cursor() as cursor:
        cursor.execute(_COUNTS_SQL, [memory_ids])
        return dict(cursor.fetchall())


_COUNTS_SQL = (
    f'SELECT "memory_id", count(*) FROM "{Attachment._meta.db_table}" '
    'WHERE "memory_id" = ANY(%s::uuid[]) GROUP BY "memory_id"'
)


def photo_counts_attach(memories: list) -> list:
    """Give each memory its photo count (one query for all); the same list back.

    For memories the caller has already been allowed to see (the gate's answer for an
    agent, the owner's own): a count is told only of a memory its reader may see.
    """
    counts = attachment_counts(memory_ids=[memory.pk for memory in memories])
    for memory in memories:
        memory._photo_count = counts.get(memory.pk, 0)
    return memories


def photo_count(memory) -> int:
    """How many photos a memory has (attached by photo_counts_attach, else counted now)."""
    count = getattr(memory, "_photo_count", None)
    if count is None:
        count = memory._photo_count = Attachment.objects.filter(memory_id=memory.pk).count()
    return count


def first_photo_thumbnails(*, memory_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The thumbnail address of each memory's first photo (for the owner's Universe); the
    address still answers only whoever the gate lets see the memory."""
    from django.urls import reverse

    firsts: dict[uuid.UUID, str] = {}
    rows = Attachment.objects.filter(memory_id__in=list(memory_ids)).order_by(
        "memory_id", "position", "created_at"
    )
    for memory_id, attachment_id in rows.values_list("memory_id", "pk"):
        firsts.setdefault(memory_id, reverse("attachment_thumbnail", args=[attachment_id]))
    return firsts
