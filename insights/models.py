"""Insights: shareable generalisations written from private memories (Kernle's memory_generalize).

An insight is an ordinary memory of kind `knowledge` with no participants, so the
consent gate treats it like any untagged memory (the owner's Self decides). Which
memories it was written from is kept here, in a table of its own, and shown to the
owner only: no agent or circle surface reads it.
"""

from __future__ import annotations

from django.db import models


class InsightSource(models.Model):
    """One memory an insight was generalised from."""

    insight = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="insight_sources")
    # CASCADE: deleting a source memory forgets that it was one; the insight stays.
    source = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["insight", "source"], name="one_row_per_insight_source"),
            models.CheckConstraint(
                condition=~models.Q(insight=models.F("source")), name="insight_not_own_source"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.insight_id} from {self.source_id}"
