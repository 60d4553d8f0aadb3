"""Celery task for imports: thin, takes the job id, calls portability.services.import_run."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from portability import services

# Each run works for at most this long (KEEPSAKE_IMPORT_RUN_SECONDS, 60 s), then
# queues its own continuation, so a 50 000-entry import never meets the task time
# limit and a worker restart loses at most one uncommitted batch. Killed outright,
# the run's message goes back to the queue (acks_late): at once if only the pool
# process died, after CELERY_VISIBILITY_TIMEOUT if the whole worker did; either
# way the next run starts after the last committed batch.
RUN_BUDGET_SECONDS: float = settings.KEEPSAKE_IMPORT_RUN_SECONDS


@shared_task(
    name="portability.import_job_run",
    soft_time_limit=240,
    time_limit=300,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=120,
    max_retries=6,
)
def import_job_run(job_id: str) -> None:
    """Import the next batches of a job; re-queue itself while work is left."""
    if services.import_run(job_id=job_id, time_budget_seconds=RUN_BUDGET_SECONDS):
        services.import_continue_later(job_id=job_id)
