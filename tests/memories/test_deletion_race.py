"""Deleting memories while the workers write edges and proposals about them (issue #40, item 1).

Each thread has its own database connection, so the deletion (through the API) and the
tasks (their bodies, as a worker runs them) are real concurrent PostgreSQL sessions.
Before the fix, an edge committed between Django collecting a memory's references and
deleting the memory made the deletion fail at COMMIT (a 500 that deleted nothing).
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from django.db import connection
from django.db.models.signals import pre_delete
from django.test import Client
from django.utils import timezone

from accounts.models import TokenKind
from accounts.services import access_token_create
from memories import tasks
from memories.doctor import doctor_examine
from memories.embeddings import MODEL_NAME
from memories.models import (
    EMBEDDING_DIMENSIONS,
    EdgeKind,
    Memory,
    MemoryEdge,
    MemoryKind,
    MemoryParticipant,
    SupersessionProposal,
)
from memories.services import ParticipantSpec, memory_create, memory_edges_refresh
from people.services import person_create

pytestmark = pytest.mark.django_db(transaction=True)


def _api(token: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {token}"})


def _vector(seed: int) -> list[float]:
    rng = random.Random(seed)
    return [1.0 + rng.random() * 0.05 for _ in range(EMBEDDING_DIMENSIONS)]  # all close: similar edges


def _journal(owner, *, count: int) -> list[Memory]:
    people = [person_create(owner=owner, display_name=name) for name in ("Bob", "Carol")]
    memories = [
        memory_create(
            owner=owner,
            body=f"Walk {index} by the river",
            kind=MemoryKind.KNOWLEDGE,
            participants=[ParticipantSpec(person) for person in people],
        )
        for index in range(count)
    ]
    for index, memory in enumerate(memories):
        Memory.objects.filter(pk=memory.pk).update(
            embedding=_vector(index), embedding_model=MODEL_NAME, embedded_at=timezone.now()
        )
    return memories


def test_the_edge_and_proposal_foreign_keys_cascade_in_the_database(db):
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT conrelid::regclass::text, confdeltype FROM pg_constraint
             WHERE contype = 'f' AND confrelid = 'memories_memory'::regclass
               AND conrelid IN ('memories_memoryedge'::regclass, 'memories_supersessionproposal'::regclass)
            """
        )
        actions = cursor.fetchall()
    assert len(actions) == 4
    assert {action for _, action in actions} == {"c"}


def test_an_edge_written_while_the_deletion_runs_never_fails_it(alice):
    """The worker commits a new edge to X after the deletion collected X's edges, before X goes."""
    _, token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="race")
    doomed, neighbour = _journal(alice, count=2)
    for memory in (doomed, neighbour):
        memory_edges_refresh(memory_id=memory.pk)
    assert MemoryEdge.objects.filter(source=neighbour, target=doomed).exists()
    worker_errors: list[BaseException] = []
    workers: list[threading.Thread] = []

    def worker() -> None:
        try:
            tasks.compute_edges([str(neighbour.pk)], False)  # replaces neighbour → doomed with a new row
        except BaseException as error:
            worker_errors.append(error)
        finally:
            connection.close()

    def edges_written_meanwhile(sender, instance, **kwargs) -> None:
        if workers:
            return
        workers.append(threading.Thread(target=worker))
        workers[0].start()
        workers[0].join(5)  # finishes, unless it waits for this deletion's lock (then it goes on after)

    pre_delete.connect(edges_written_meanwhile, sender=MemoryEdge)
    try:
        response = _api(token).delete(f"/api/v1/memories/{doomed.pk}/")
    finally:
        pre_delete.disconnect(edges_written_meanwhile, sender=MemoryEdge)
    for thread in workers:
        thread.join(60)
    assert workers, "the deletion collected no edge: the race was not set up"
    assert response.status_code == 204, response.content[:500]
    assert worker_errors == []
    assert not Memory.objects.filter(pk=doomed.pk).exists()
    assert not MemoryEdge.objects.filter(target_id=doomed.pk).exists()
    assert not MemoryEdge.objects.filter(source_id=doomed.pk).exists()


def test_an_edge_task_waiting_on_a_deletion_skips_the_gone_memory(alice):
    """The deletion holds X when the worker comes to write: the worker waits, then leaves X out."""
    doomed, neighbour = _journal(alice, count=2)
    memory_edges_refresh(memory_id=neighbour.pk)
    assert MemoryEdge.objects.filter(source=neighbour, target=doomed).exists()
    outcome: dict[str, object] = {}
    started = threading.Event()

    def worker() -> None:
        try:
            started.set()
            outcome["neighbours"] = memory_edges_refresh(memory_id=neighbour.pk)
        except BaseException as error:
            outcome["error"] = error
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    from django.db import transaction

    with transaction.atomic():
        Memory.objects.filter(pk=doomed.pk).delete()  # holds the row until COMMIT
        thread.start()
        started.wait(10)
        time.sleep(1.0)  # the worker gets to its lock and waits there (or, before the fix, to COMMIT)
    thread.join(60)
    assert "error" not in outcome, outcome.get("error")
    assert not MemoryEdge.objects.filter(target_id=doomed.pk).exists()
    assert MemoryEdge.objects.filter(source=neighbour, kind=EdgeKind.SHARED_PERSON).count() == 0


ROUNDS = 25


def test_deleting_memories_while_the_workers_run_on_them_in_a_loop(alice):
    """Deletions through the API race embedding, edge and supersession tasks looping over the journal."""
    _, token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="race")
    memories = _journal(alice, count=16)
    ids = [str(memory.pk) for memory in memories]
    # Half need their embedding: the embedding task has real work in the loop.
    Memory.objects.filter(pk__in=ids[::2]).update(embedding=None, embedded_at=None, edges_computed_at=None)
    failures: list[str] = []
    stop = threading.Event()

    def loop(task, *args) -> None:
        try:
            while not stop.is_set():
                # As a worker runs it, retries of transient errors (a deadlock) included.
                task.apply(args=args, throw=True)
        except BaseException as error:
            failures.append(f"{task.name}: {error!r}")
        finally:
            connection.close()

    workers = [
        threading.Thread(target=loop, args=(tasks.refresh_memories, ids)),
        threading.Thread(target=loop, args=(tasks.compute_edges, ids, True)),
        threading.Thread(target=loop, args=(tasks.compute_edges, list(reversed(ids)), False)),
        threading.Thread(target=loop, args=(tasks.propose_supersessions, ids)),
    ]
    for thread in workers:
        thread.start()
    rng = random.Random(40)
    client = _api(token)
    doomed = rng.sample(memories, ROUNDS if ROUNDS < len(memories) else len(memories) - 4)
    try:
        for memory in doomed:
            time.sleep(rng.uniform(0.0, 0.15))
            response = client.delete(f"/api/v1/memories/{memory.pk}/")
            if response.status_code != 204:
                failures.append(f"DELETE {response.status_code}: {response.content[:300]!r}")
    finally:
        stop.set()
        for thread in workers:
            thread.join(300)
    assert not any(thread.is_alive() for thread in workers), "a task hung"
    assert failures == []

    gone = [memory.pk for memory in doomed]
    kept = [memory.pk for memory in memories if memory.pk not in gone]
    assert not Memory.objects.filter(pk__in=gone).exists()
    # Nothing points at a deleted memory, and the kept ones are whole.
    assert not MemoryEdge.objects.filter(source_id__in=gone).exists()
    assert not MemoryEdge.objects.filter(target_id__in=gone).exists()
    assert not SupersessionProposal.objects.filter(older_id__in=gone).exists()
    assert not SupersessionProposal.objects.filter(newer_id__in=gone).exists()
    assert not MemoryParticipant.objects.filter(memory_id__in=gone).exists()
    assert MemoryParticipant.objects.filter(memory_id__in=kept).count() == 2 * len(kept)
    findings = {finding.check.code: finding.ids for finding in doctor_examine() if finding.ids}
    findings.pop("missing_embeddings", None)  # the loop stopped mid-work: the sweep's job, not damage
    assert findings == {}
