"""Celery tasks for a memory's derived data: embedding and edges.

Thin: each takes ids (JSON), calls one service in memories.services, and queues
any follow-up by id. The services are idempotent, so redelivery (acks_late) and
duplicates from the sweep are harmless.

Two paths: a memory saved by hand is embedded by its own task on the default
queue (refresh_memories), at once. Bulk work (an import's memories, the sweep's
catching up) goes in batches to the bulk queue (embed_bulk, compute_edges_bulk;
routed in config/celery.py), which a worker takes in turn with the default
queue, so a 1,500-entry import never makes a memory saved meanwhile wait.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta

from celery import Task, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from memories import gate_index, kind_inference, lifecycle, open_vectors, services, supersession

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
    will find what this could not queue. Each thread keeps its own broker
    connection (_publishing_connection): opening one per publish cost ~4.6 ms of a
    memory save against ~0.6. One the broker closed (a restart) reconnects on the
    next publish (the transport's max_retries); one that fails is dropped, and the
    next publish opens a new one; a broker restarted empty still gets the message
    into its queue (tests/memories/test_tasks.py). Waits are bounded by
    CELERY_BROKER_CONNECTION_TIMEOUT and the transport's socket_timeout.
    """
    collected = _bulk_requests.get()
    if collected is not None and task.name == refresh_memories.name and not options:
        collected.extend(args[0])  # queued in batches when embeddings_in_bulk() ends
        return True
    try:
        task.apply_async(args=args, connection=_publishing_connection(), retry=False, **options)
    except Exception:
        _forget_publishing_connection()
        logger.warning("Could not queue %s%r; the sweep will catch up.", task.name, args, exc_info=True)
        return False
    return True


# This thread's broker connection for publishing, and what it was opened for:
# (process id, broker URLs). A connection is never shared between threads (kombu's
# are not thread-safe) nor across a fork (a worker's pool process opens its own),
# and a changed broker URL (tests point the app elsewhere) opens a new one.
_publishing = threading.local()


def _publishing_connection():
    """This thread's broker connection for publishing, opened on first use."""
    from config.celery import app

    key = (os.getpid(), app.conf.broker_write_url, app.conf.broker_url)
    connection = getattr(_publishing, "connection", None)
    if connection is not None and _publishing.key == key:
        return connection
    if connection is not None and _publishing.key[0] == key[0]:
        _forget_publishing_connection()  # another broker's, in this process: closed
    _publishing.connection, _publishing.key = app.connection_for_write(), key
    return _publishing.connection


def _forget_publishing_connection() -> None:
    connection = getattr(_publishing, "connection", None)
    _publishing.connection = None
    if connection is not None:
        try:
            connection.release()
        except Exception:  # already broken: nothing more to close
            logger.debug("Closing a broken broker connection failed", exc_info=True)


def _uuids(memory_ids: list[str]) -> list[uuid.UUID]:
    return [uuid.UUID(memory_id) for memory_id in memory_ids]


def _groups(memory_ids: Sequence[uuid.UUID | str], size: int) -> Iterator[list[str]]:
    ids = [str(memory_id) for memory_id in memory_ids]
    for start in range(0, len(ids), max(1, size)):
        yield ids[start : start + size]


# The embedding requests collected inside embeddings_in_bulk(); None outside it.
_bulk_requests: ContextVar[list[str] | None] = ContextVar("bulk_embedding_requests", default=None)


@contextmanager
def embeddings_in_bulk() -> Iterator[None]:
    """Inside, a saved memory's embedding request joins a batch for the bulk queue.

    For imports (portability.services._run_batch): one task per memory, each
    encoding one text and searching its neighbours alone, made a large import
    wait minutes and held up everything else on the worker. Requests made
    inside are queued on the way out as embed_bulk tasks of
    MEMORY_EMBEDDINGS_BULK_BATCH_SIZE, also when the block raised (what it
    committed still needs embedding). A request published after the block (an
    on-commit that fires later) goes out on its own as before; one that cannot
    be published is found by the sweep, as always.
    """
    collected: list[str] = []
    token = _bulk_requests.set(collected)
    try:
        yield
    finally:
        _bulk_requests.reset(token)
        for group in _groups(list(dict.fromkeys(collected)), settings.MEMORY_EMBEDDINGS_BULK_BATCH_SIZE):
            enqueue(embed_bulk, group)


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


@shared_task(name="memories.embed_bulk", soft_time_limit=240, time_limit=300, **RETRY_OPTIONS)
def embed_bulk(memory_ids: list[str]) -> int:
    """Bulk queue: embed these memories in one batch, then queue their edges in groups.

    The edges (a batch's neighbours, shared people and writes in a few statements:
    memory_edges_refresh_batch) and their neighbours' follow-ups are separate
    tasks: the worker goes back to the default queue between them. Memories this
    call did not embed (another task did, or the text changed meanwhile) get their
    edges from whoever embedded them, or the sweep.
    Returns how many it embedded.
    """
    stored = services.memory_embed_batch(memory_ids=_uuids(memory_ids))
    for group in _groups(stored, settings.MEMORY_EDGES_BULK_BATCH_SIZE):
        enqueue(compute_edges_bulk, group, True)
    return len(stored)


@shared_task(name="memories.compute_edges_bulk", soft_time_limit=120, time_limit=180, **RETRY_OPTIONS)
def compute_edges_bulk(memory_ids: list[str], invalidate_neighbours: bool) -> None:
    """compute_edges on the bulk queue; the neighbours' follow-ups stay there too."""
    neighbours = services.memory_edges_refresh_many(
        memory_ids=_uuids(memory_ids), invalidate_neighbours=invalidate_neighbours
    )
    for group in _groups(neighbours, settings.MEMORY_EDGES_BULK_BATCH_SIZE):
        enqueue(compute_edges_bulk, group, False)


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
    # What the sweep finds is a backlog (an import, a worker that was down): the bulk queue.
    for batch in plan.embed_batches:
        enqueue(embed_bulk, [str(memory_id) for memory_id in batch], expires=expires)
    # A memory's own stale lists bring its neighbours' up to date too (a worker that died
    # mid-refresh left both undone); a follow-up's refresh goes no further.
    for group in _groups(plan.stale_edges, settings.MEMORY_EDGES_BULK_BATCH_SIZE):
        enqueue(compute_edges_bulk, group, True, expires=expires)
    for group in _groups(plan.follow_ups, settings.MEMORY_EDGES_BULK_BATCH_SIZE):
        enqueue(compute_edges_bulk, group, False, expires=expires)
    queued = sum(len(batch) for batch in plan.embed_batches) + len(plan.stale_edges) + len(plan.follow_ups)
    if queued:
        logger.info("Sweep queued %d memories.", queued)
    return queued


# --- The agents' vector index after a grant (memories/gate_index.py) ------------------

# Seconds one index_opened_gates run spends before it hands the rest to a fresh
# task: the worker takes its other queue in between.
GATE_INDEX_RUN_SECONDS = 2.0


def queue_gate_indexing(owner_id: int | None) -> None:
    """After commit, put the gate rows this transaction opened into the agents' index (bulk queue).

    A lost publish only delays the index: the beat runs the task too, and until
    it has, searches find those rows exactly (search.knn_open._unindexed_open_neighbours).
    """
    transaction.on_commit(
        lambda: enqueue(index_opened_gates, owner_id, queue=settings.MEMORY_EMBEDDINGS_BULK_QUEUE)
    )


@shared_task(name="memories.index_opened_gates", soft_time_limit=50, time_limit=60, **RETRY_OPTIONS)
def index_opened_gates(owner_id: int | None = None) -> int:
    """Bulk queue and beat: index the open, embedded, unindexed gate rows (the owner's, or all).

    Idempotent (rows are claimed FOR UPDATE SKIP LOCKED, the condition re-checked):
    duplicates and redeliveries are harmless. Returns how many rows it indexed.
    """
    indexed, more = gate_index.gate_rows_index_opened(owner_id=owner_id, max_seconds=GATE_INDEX_RUN_SECONDS)
    if more:
        enqueue(index_opened_gates, owner_id, queue=settings.MEMORY_EMBEDDINGS_BULK_QUEUE)
    return indexed


@shared_task(name="memories.gate_changes_prune", soft_time_limit=50, time_limit=60, **RETRY_OPTIONS)
def gate_changes_prune() -> int:
    """Beat: mark the gate change rows of ended transactions, delete those no kept copy needs.

    (memories/open_vectors.py.) Returns how many rows it deleted.
    """
    with transaction.atomic():
        _, deleted = open_vectors.prune()
    return deleted


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
