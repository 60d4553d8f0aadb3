"""memories_memory keeps room on its pages for a row's next version (migration 0018).

The workers write a memory's row again after storing its vector (the edges stamp); with
room on the page that is a HOT update, which touches no index — not the vector index
either, which a new row version elsewhere would be inserted into again.
"""

from __future__ import annotations

import numpy as np
from django.db import connection
from django.utils import timezone

from memories.models import Memory
from tests.factories import MemoryFactory, UserFactory


def _storage_options() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'memories_memory'")
        return set(cursor.fetchone()[0] or [])


def _hot_updates_in_this_transaction() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated('memories_memory'::regclass), "
            "pg_stat_get_xact_tuples_hot_updated('memories_memory'::regclass)"
        )
        return cursor.fetchone()


def test_memory_pages_keep_room_for_updates_and_rows_stay_whole(db):
    assert {"fillfactor=70", "toast_tuple_target=4080"} <= _storage_options()


def test_stamping_embedded_memories_is_mostly_a_hot_update(db):
    owner = UserFactory()
    vectors = np.random.default_rng(3).standard_normal((40, 384)).astype(np.float32)
    # As an import's rows: saved together (sharing pages), then each vector stored, then each
    # row's edges stamped.
    memories = [MemoryFactory(owner=owner, body=" ".join(["by the river"] * 60)) for _ in vectors]
    for memory, vector in zip(memories, vectors, strict=True):
        Memory.objects.filter(pk=memory.pk).update(embedding=vector, embedded_at=timezone.now())
    updated_before, hot_before = _hot_updates_in_this_transaction()
    for memory in memories:
        Memory.objects.filter(pk=memory.pk).update(edges_computed_at=timezone.now())
    updated, hot = _hot_updates_in_this_transaction()
    assert updated - updated_before == len(memories)
    # Measured: 13-16 of 40 HOT with fillfactor 70, 0-1 with full pages (fillfactor 100).
    assert hot - hot_before >= 8, (updated - updated_before, hot - hot_before)
