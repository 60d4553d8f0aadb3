"""Reads about indexing: which memories are still waiting for their embedding.

A memory is searchable by its words from the moment it is saved (full text is
part of the row) and by meaning once a worker has stored its embedding. These
counts tell the owner how far that has got: the import page's "Indexing N of M"
and the timeline's quiet note. Owner-scoped, counts only; no text leaves here.
Fully searchable is one step later: its edges (the memory page's related memories)
computed after its embedding, which the import page counts too (`linked`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, F, Q, QuerySet

from memories.models import Memory


@dataclass(frozen=True)
class IndexingProgress:
    indexed: int
    total: int
    # Of the embedded ones, how many have their edges computed since (fully searchable).
    linked: int = 0

    @property
    def waiting(self) -> int:
        return self.total - self.indexed

    @property
    def done(self) -> bool:
        return self.indexed >= self.total

    @property
    def linking(self) -> bool:
        """Every memory embedded, some of their edges still being computed."""
        return self.done and self.linked < self.total

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, self.indexed * 100 // self.total)


def memory_unindexed_count(*, owner: AbstractBaseUser | int) -> int:
    """How many of the owner's memories have no embedding yet (search finds them by words only)."""
    return Memory.objects.filter(owner=owner, embedded_at__isnull=True).count()


def memory_indexing_progress(
    *, owner: AbstractBaseUser | int, memory_ids: QuerySet | list
) -> IndexingProgress:
    """Of these memories (those that still exist and are the owner's), how many are embedded,
    and how many of those have their edges computed since.

    `memory_ids` may be a subquery (an import's records): counted in one statement.
    """
    counts = Memory.objects.filter(owner=owner, pk__in=memory_ids).aggregate(
        total=Count("pk"),
        indexed=Count("pk", filter=Q(embedded_at__isnull=False)),
        linked=Count("pk", filter=Q(embedded_at__isnull=False, edges_computed_at__gte=F("embedded_at"))),
    )
    return IndexingProgress(indexed=counts["indexed"], total=counts["total"], linked=counts["linked"])
