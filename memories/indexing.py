"""Reads about indexing: which memories are still waiting for their embedding.

A memory is searchable by its words from the moment it is saved (full text is
part of the row) and by meaning once a worker has stored its embedding. These
counts tell the owner how far that has got: the import page's "Indexing N of M"
and the timeline's quiet note. Owner-scoped, counts only; no text leaves here.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Q, QuerySet

from memories.models import Memory


@dataclass(frozen=True)
class IndexingProgress:
    indexed: int
    total: int

    @property
    def waiting(self) -> int:
        return self.total - self.indexed

    @property
    def done(self) -> bool:
        return self.indexed >= self.total

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, self.indexed * 100 // self.total)


def memory_unindexed_count(*, owner: AbstractBaseUser | int) -> int:
    """How many of the owner's memories have no embedding yet (search finds them by words only)."""
    return Memory.objects.filter(owner=owner, embedded_at__isnull=True).count()


def memory_indexing_progress(
    *, owner: AbstractBaseUser | int, memory_ids: QuerySet | list
) -> IndexingProgress:
    """Of these memories (those that still exist and are the owner's), how many are embedded.

    `memory_ids` may be a subquery (an import's records): counted in one statement.
    """
    counts = Memory.objects.filter(owner=owner, pk__in=memory_ids).aggregate(
        total=Count("pk"), indexed=Count("pk", filter=Q(embedded_at__isnull=False))
    )
    return IndexingProgress(indexed=counts["indexed"], total=counts["total"])
