"""Celery task for the nightly backup (CELERY_BEAT_SCHEDULE["backups-nightly"]). Thin: one service."""

from __future__ import annotations

from celery import shared_task

from backups.services import BackupError, backup_create


@shared_task(
    name="backups.nightly",
    # A dump of a large journal takes a while; the default 300 s limit would kill it.
    soft_time_limit=3300,
    time_limit=3600,
    autoretry_for=(BackupError,),
    retry_backoff=300,
    retry_backoff_max=1800,
    max_retries=3,
)
def nightly_backup() -> str:
    """Back up the database in use and rotate; returns the manifest's file name."""
    return backup_create().manifest_path.name
