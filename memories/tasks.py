"""Celery tasks for a memory's derived data: embedding and edges.

Thin: each takes ids (JSON), calls one service in memories.services, and queues
any follow-up by id. The services are idempotent, so redelivery (acks_late) and
duplicates from the sweep are harmless.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from memories import kind_inference, lifecycle, services, supersession

logger = logging.getLogger(__name__)

# A database that is briefly unreachable, a deadlock or serialisation failure:
# worth retrying with backoff. Anything else is a bug and should be seen.
TRANSIENT_ERRORS = (OperationalError, InterfaceError)
RETRY_OPTIONS = {
    "autoretry_for": TRANSIENT_ERRORS,
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 6,
}


def enqueue(task: Task, *args, **options) -> bool:
    """Publish a task; log and return False instead of raising if the broker is unreachable.

    Used after commit by saves: the memory is already stored, and the beat sweep
    will find what this could not queue. A fresh connection per publish (rather
    than the app's pool) keeps the broker URL read at publish time and bounds the
    wait by CELERY_BROKER_CONNECTION_TIMEOUT.
    """
    from config.celery import app

    try:
        with app.connection_for_write() as connection:
            task.apply_async(args=args, connection=connection, retry=False, **options)
    except Exception:
        logger.warning("Could not queue %s%r; the sweep will catch up.", task.name, args, exc_info=True)
        return False
    return True


def _uuids(memory_ids: list[str]) -> list[uuid.UUID]:
    return [uuid.UUID(memory_id) for memory_id in memory_ids]


@shared_task(name="memories.refresh_memories", soft_time_limit=240, time_limit=300, **RETRY_OPTIONS)
def refresh_memories(memory_ids: list[str]) -> None:
    """Embed these memories in one batch and recompute their edges."""
    neighbours = services.memory_refresh(memory_ids=_uuids(memory_ids))
    if neighbours:
        enqueue(compute_edges, [str(memory_id) for memory_id in neighbours], False)


@shared_task(name="memories.compute_edges", soft_time_limit=120, time_limit=180, **RETRY_OPTIONS)
def compute_edges(memory_ids: list[str], invalidate_neighbours: bool) -> None:
    """Recompute these memories' edges (text unchanged, e.g. participants edited)."""
    neighbours = services.memory_edges_refresh_many(
        memory_ids=_uuids(memory_ids), invalidate_neighbours=invalidate_neighbours
    )
    if neighbours:
        enqueue(compute_edges, [str(memory_id) for memory_id in neighbours], False)


@shared_task(name="memories.sweep", soft_time_limit=50, time_limit=60, **RETRY_OPTIONS)
def sweep() -> int:
    """Beat: queue memories missing an embedding or with stale edges. Returns how many."""
    plan = services.memory_sweep_plan(
        batch_size=settings.MEMORY_SWEEP_BATCH_SIZE,
        max_memories=settings.MEMORY_SWEEP_MAX_MEMORIES,
        grace=timedelta(seconds=settings.MEMORY_SWEEP_GRACE),
    )
    # Unconsumed sweep messages expire: while no worker runs, they do not pile
    # up work for its return (the next sweep queues what is still missing).
    expires = settings.MEMORY_SWEEP_INTERVAL * 2
    for batch in plan.embed_batches:
        enqueue(refresh_memories, [str(memory_id) for memory_id in batch], expires=expires)
    if plan.stale_edges:
        enqueue(compute_edges, [str(memory_id) for memory_id in plan.stale_edges], False, expires=expires)
    queued = sum(len(batch) for batch in plan.embed_batches) + len(plan.stale_edges)
    if queued:
        logger.info("Sweep queued %d memories.", queued)
    return queued


# --- Lifecycle (memories/lifecycle.py, memories/supersession.py) ---------------------


@shared_task(name="memories.mark_expired", soft_time_limit=50, time_limit=60, **RETRY_OPTIONS)
def mark_expired() -> int:
    """Beat: stamp expired_at on memories whose lifetime is over. Deletes nothing."""
    return lifecycle.memories_mark_expired()


@shared_task(name="memories.propose_supersessions", soft_time_limit=240, time_limit=300, **RETRY_OPTIONS)
def propose_supersessions(memory_ids: list[str]) -> int:
    """Suggest older memories these may replace; the owner confirms or dismisses them."""
    return sum(
        len(supersession.supersession_propose(memory_id=memory_id)) for memory_id in _uuids(memory_ids)
    )


@shared_task(name="memories.supersession_sweep", soft_time_limit=50, time_limit=60, **RETRY_OPTIONS)
def supersession_sweep() -> int:
    """Beat: queue memories embedded since their last supersession check. Returns how many."""
    memory_ids = supersession.supersession_memories_to_check(limit=settings.MEMORY_SWEEP_MAX_MEMORIES)
    if memory_ids:
        enqueue(
            propose_supersessions,
            [str(memory_id) for memory_id in memory_ids],
            expires=settings.SUPERSESSION_SWEEP_INTERVAL * 2,
        )
    return len(memory_ids)


@shared_task(name="memories.infer_kind_with_llm", soft_time_limit=300, time_limit=330, **RETRY_OPTIONS)
def infer_kind_with_llm(memory_id: str, saved_at: str) -> str | None:
    """Ask the LLM for the kind the rules inferred at the save stamped `saved_at`; store it if unchanged.

    LLM failures are not retried: the rules' kind is a fine answer. The time limit
    is a backstop; LLM_TIMEOUT bounds each wait on the server.
    """
    return kind_inference.memory_apply_llm_kind(
        memory_id=uuid.UUID(memory_id), saved_at=datetime.fromisoformat(saved_at)
    )
