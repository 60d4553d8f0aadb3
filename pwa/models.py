"""A quick capture typed offline, sent later: its key, so that a retry never saves it twice."""

from __future__ import annotations

from django.db import models

from config.models import owner_key


class OfflineCapture(models.Model):
    """One capture the browser kept while offline, by the key it made for it (Idempotency-Key).

    The browser sends the same key on every try; the first try that reaches the server
    saves the memory and this row in one transaction, and any later try with the key
    gets that memory back instead of a second one.
    """

    owner = owner_key()
    key = models.CharField(max_length=64)
    memory = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "key"], name="pwa_capture_key_unique")]

    def __str__(self) -> str:
        return f"offline capture {self.key}"
