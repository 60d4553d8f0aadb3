from __future__ import annotations

from django.db import models

from config.models import UUIDModel, owner_key


class ImportFormat(models.TextChoices):
    KEEPSAKE = "keepsake", "Keepsake export (JSON)"
    DAYONE = "dayone", "Day One (JSON)"


class ImportStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class ImportJob(UUIDModel):
    """One uploaded file being imported in the background, batch by batch.

    The validated, normalised items live in `payload` (not on disk) so a worker in
    another container can read them; it is cleared once the job is done. Progress
    counters are updated in the same transaction as each batch's rows, so they are
    always exactly what has been committed.
    """

    owner = owner_key("import_jobs")
    format = models.CharField(max_length=20, choices=ImportFormat.choices)
    filename = models.CharField(max_length=255, blank=True)
    status = models.CharField(max_length=10, choices=ImportStatus.choices, default=ImportStatus.QUEUED)
    payload = models.JSONField(null=True, blank=True)
    total = models.PositiveIntegerField(default=0)
    processed = models.PositiveIntegerField(default=0)
    imported = models.PositiveIntegerField(default=0)
    skipped_count = models.PositiveIntegerField(default=0)
    # Consent decisions the file attributed to the people themselves (`self`), written as
    # the importer's: an import never speaks for anyone (SPEC §4). Shown on the job's page.
    self_claims_rewritten = models.PositiveIntegerField(default=0)
    # [{"item": "...", "reason": "..."}], capped (see services.SKIP_REPORT_LIMIT).
    skipped = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.get_format_display()} import ({self.status}, {self.processed}/{self.total})"

    @property
    def is_active(self) -> bool:
        return self.status in (ImportStatus.QUEUED, ImportStatus.RUNNING)

    @property
    def percent(self) -> int:
        if not self.total:
            return 100 if self.status == ImportStatus.DONE else 0
        return min(100, self.processed * 100 // self.total)


class ImportOutcome(models.TextChoices):
    IMPORTED = "imported", "Imported"
    SKIPPED = "skipped", "Skipped"


class ImportedItem(models.Model):
    """Which items of a job are done, and what they became.

    Written in the same transaction as the objects an item creates; the unique
    key makes a re-run (after a crash, or a redelivered task) skip finished items
    instead of duplicating them.
    """

    job = models.ForeignKey(ImportJob, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=200)
    outcome = models.CharField(max_length=10, choices=ImportOutcome.choices)
    # The id of the person / memory / agent created for this item, for later references.
    object_id = models.UUIDField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "key"], name="one_record_per_import_item")]

    def __str__(self) -> str:
        return f"{self.key}: {self.outcome}"
