"""Embedding and edge tasks, run in-process against the real database."""

from __future__ import annotations

import base64
import json
import threading
from datetime import timedelta

import numpy as np
import pytest
import redis
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from memories import embeddings, tasks
from memories.models import EdgeKind, Memory, MemoryEdge
from memories.services import (
    EDGES_FOLLOW_UP,
    ParticipantSpec,
    memory_create,
    memory_embed_batch,
    memory_sweep_plan,
    memory_update,
)
from people.services import person_create
from tests.conftest import OWN_DB, SECOND_OWN_DB, broker_url_with_db, suite_redis_db

DOG = "My dog Rex loves chasing the ball in the park"
FETCH = "Rex the dog played fetch with a ball at the park"
TAXES = "I filed the quarterly tax return with the accountant"


def refresh(*memories: Memory) -> None:
    tasks.refresh_memories([str(memory.pk) for memory in memories])


def edges_of(memory: Memory) -> set[tuple[str, str, float]]:
    return {
        (str(target_id), kind, round(weight, 5))
        for target_id, kind, weight in MemoryEdge.objects.filter(source=memory).values_list(
            "target_id", "kind", "weight"
        )
    }


@pytest.fixture
def private_broker():
    """Point publishing at a Redis database of this test's own; yields a client on it."""
    from django.conf import settings

    url = broker_url_with_db(settings.REDIS_URL, suite_redis_db(OWN_DB))
    client = redis.Redis.from_url(url)
    client.flushdb()
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = url
    yield client
    celery_app.conf.broker_url = previous
    client.flushdb()


def queued_messages(client: redis.Redis, queue: str = "celery") -> list[tuple[str, list]]:
    # Kombu pushes on the left and pops on the right: reverse for publish order.
    messages = [json.loads(raw) for raw in reversed(client.lrange(queue, 0, -1))]
    return [
        (message["headers"]["task"], json.loads(base64.b64decode(message["body"]))[0]) for message in messages
    ]


def test_refresh_stores_vector_model_and_time(alice):
    memory = memory_create(owner=alice, title="Park", body=DOG)
    refresh(memory)
    memory.refresh_from_db()
    assert memory.embedding_model == "all-MiniLM-L6-v2"
    assert memory.embedded_at is not None
    assert memory.embedding_claimed_at is None
    expected = embeddings.embed_texts([f"Park\n\n{DOG}"])[0]
    np.testing.assert_allclose(np.array(memory.embedding), expected, atol=1e-5)


def test_similar_edges_link_related_memories_above_threshold(alice):
    dog = memory_create(owner=alice, body=DOG)
    fetch = memory_create(owner=alice, body=FETCH)
    taxes = memory_create(owner=alice, body=TAXES)
    refresh(dog, fetch, taxes)
    assert {(target, kind) for target, kind, _ in edges_of(dog)} == {(str(fetch.pk), EdgeKind.SIMILAR)}
    assert {(target, kind) for target, kind, _ in edges_of(fetch)} == {(str(dog.pk), EdgeKind.SIMILAR)}
    assert edges_of(taxes) == set()
    (weight,) = MemoryEdge.objects.filter(source=dog).values_list("weight", flat=True)
    assert 0.5 < weight <= 1.0


def test_similar_threshold_is_a_setting(alice, settings):
    settings.MEMORY_EDGES_SIMILAR_MIN_SIMILARITY = -1.0
    dog = memory_create(owner=alice, body=DOG)
    taxes = memory_create(owner=alice, body=TAXES)
    refresh(dog, taxes)
    assert (str(dog.pk), EdgeKind.SIMILAR) in {(target, kind) for target, kind, _ in edges_of(taxes)}


def test_edges_never_link_two_owners(alice, mallory):
    alices = memory_create(owner=alice, body=DOG)
    mallorys = memory_create(owner=mallory, body=DOG)
    refresh(alices, mallorys)
    assert not MemoryEdge.objects.filter(source=alices).exists()
    assert not MemoryEdge.objects.filter(source=mallorys).exists()


def test_shared_person_edges_link_memories_with_someone_in_common(alice):
    bob = person_create(owner=alice, display_name="Bob")
    carol = person_create(owner=alice, display_name="Carol")
    both = memory_create(
        owner=alice, body="Chess night", participants=[ParticipantSpec(bob), ParticipantSpec(carol)]
    )
    bob_only = memory_create(owner=alice, body="Bob's birthday cake", participants=[ParticipantSpec(bob)])
    nobody = memory_create(owner=alice, body="Quiet afternoon reading")
    refresh(both, bob_only, nobody)
    shared = set(
        MemoryEdge.objects.filter(kind=EdgeKind.SHARED_PERSON).values_list("source", "target", "weight")
    )
    assert shared == {(both.pk, bob_only.pk, 1.0), (bob_only.pk, both.pk, 1.0)}


def test_the_owners_self_person_links_nothing(alice):
    me = alice.people.get(is_self=True)
    first = memory_create(owner=alice, body="I ran five kilometres", participants=[ParticipantSpec(me)])
    second = memory_create(owner=alice, body="I baked bread", participants=[ParticipantSpec(me)])
    refresh(first, second)
    assert not MemoryEdge.objects.filter(kind=EdgeKind.SHARED_PERSON).exists()


def test_refresh_twice_leaves_the_same_rows(alice):
    bob = person_create(owner=alice, display_name="Bob")
    dog = memory_create(owner=alice, body=DOG, participants=[ParticipantSpec(bob)])
    fetch = memory_create(owner=alice, body=FETCH, participants=[ParticipantSpec(bob)])
    refresh(dog, fetch)
    first_embedded_at = Memory.objects.get(pk=dog.pk).embedded_at
    first_edges = (edges_of(dog), edges_of(fetch))
    refresh(dog, fetch)
    tasks.compute_edges([str(dog.pk), str(fetch.pk)], True)
    assert Memory.objects.get(pk=dog.pk).embedded_at == first_embedded_at  # not encoded again
    assert (edges_of(dog), edges_of(fetch)) == first_edges
    assert MemoryEdge.objects.count() == 4  # similar + shared_person, both ways


def test_text_edit_clears_the_embedding_and_refresh_recomputes_it(alice):
    memory = memory_create(owner=alice, body=DOG)
    taxes = memory_create(owner=alice, body=TAXES)
    refresh(memory, taxes)
    memory_update(memory=memory, body="The accountant helped me file my tax return")
    memory.refresh_from_db()
    assert memory.embedding is None
    assert memory.embedded_at is None
    assert memory.edges_computed_at is None
    refresh(memory)
    memory.refresh_from_db()
    expected = embeddings.embed_texts(["The accountant helped me file my tax return"])[0]
    np.testing.assert_allclose(np.array(memory.embedding), expected, atol=1e-5)
    assert (str(taxes.pk), EdgeKind.SIMILAR) in {(target, kind) for target, kind, _ in edges_of(memory)}


def test_edit_that_keeps_the_text_keeps_the_embedding(alice):
    memory = memory_create(owner=alice, body=DOG)
    refresh(memory)
    embedded_at = Memory.objects.get(pk=memory.pk).embedded_at
    memory_update(memory=memory, body=DOG, kind="event")
    memory.refresh_from_db()
    assert memory.embedded_at == embedded_at
    assert memory.embedding is not None


def test_update_with_a_stale_instance_does_not_write_back_an_old_embedding(alice):
    memory = memory_create(owner=alice, body=DOG)
    stale_copy = Memory.objects.get(pk=memory.pk)  # loaded before the worker ran
    refresh(memory)
    memory_update(memory=stale_copy, body=DOG, kind="event")
    assert Memory.objects.get(pk=memory.pk).embedding is not None


def test_participant_edit_recomputes_shared_person_edges(alice):
    bob = person_create(owner=alice, display_name="Bob")
    carol = person_create(owner=alice, display_name="Carol")
    with_bob = memory_create(owner=alice, body="Sailing", participants=[ParticipantSpec(bob)])
    with_carol = memory_create(owner=alice, body="Pottery class", participants=[ParticipantSpec(carol)])
    edited = memory_create(owner=alice, body="Dinner out", participants=[ParticipantSpec(bob)])
    refresh(with_bob, with_carol, edited)
    assert {target for target, _, _ in edges_of(edited)} == {str(with_bob.pk)}

    memory_update(memory=edited, body="Dinner out", participants=[ParticipantSpec(carol)])
    edited.refresh_from_db()
    assert edited.edges_computed_at is None
    assert edited.embedded_at is not None  # text unchanged: vector kept
    tasks.compute_edges([str(edited.pk)], True)
    assert {target for target, _, _ in edges_of(edited)} == {str(with_carol.pk)}
    # Bob's memory pointed at the edited one; its list is refreshed too (a follow-up).
    assert Memory.objects.get(pk=with_bob.pk).edges_computed_at == EDGES_FOLLOW_UP
    tasks.compute_edges([str(with_bob.pk), str(with_carol.pk)], False)
    assert edges_of(with_bob) == set()
    assert {target for target, _, _ in edges_of(with_carol)} == {str(edited.pk)}


def test_edit_during_encoding_is_not_overwritten_by_the_old_vector(alice, monkeypatch):
    memory = memory_create(owner=alice, body=DOG)
    real_embed_texts = embeddings.embed_texts

    def edit_while_encoding(texts: list[str]) -> np.ndarray:
        memory_update(memory=Memory.objects.get(pk=memory.pk), body=TAXES)
        return real_embed_texts(texts)

    monkeypatch.setattr(embeddings, "embed_texts", edit_while_encoding)
    assert memory_embed_batch(memory_ids=[memory.pk]) == []
    monkeypatch.setattr(embeddings, "embed_texts", real_embed_texts)
    memory.refresh_from_db()
    assert memory.body == TAXES
    assert memory.embedding is None  # the vector of the old text was dropped
    assert memory_embed_batch(memory_ids=[memory.pk]) == [memory.pk]
    memory.refresh_from_db()
    np.testing.assert_allclose(np.array(memory.embedding), real_embed_texts([TAXES])[0], atol=1e-5)


def test_a_live_claim_is_left_alone_and_a_stale_one_is_taken_over(alice, settings):
    memory = memory_create(owner=alice, body=DOG)
    Memory.objects.filter(pk=memory.pk).update(embedding_claimed_at=timezone.now())
    assert memory_embed_batch(memory_ids=[memory.pk]) == []
    died_long_ago = timezone.now() - timedelta(seconds=settings.MEMORY_EMBEDDING_CLAIM_TIMEOUT + 1)
    Memory.objects.filter(pk=memory.pk).update(embedding_claimed_at=died_long_ago)
    assert memory_embed_batch(memory_ids=[memory.pk]) == [memory.pk]


def test_a_failed_encode_gives_the_claim_back(alice, monkeypatch):
    memory = memory_create(owner=alice, body=DOG)

    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model crashed")

    monkeypatch.setattr(embeddings, "embed_texts", broken)
    with pytest.raises(RuntimeError):
        memory_embed_batch(memory_ids=[memory.pk])
    memory.refresh_from_db()
    assert memory.embedding_claimed_at is None
    assert memory.embedded_at is None


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_encode_a_memory_only_once(alice):
    memory = memory_create(owner=alice, body=DOG)
    start = threading.Barrier(2)
    results: list[list] = []

    def worker() -> None:
        start.wait()
        try:
            results.append(memory_embed_batch(memory_ids=[memory.pk]))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results, key=len) == [[], [memory.pk]]
    assert Memory.objects.get(pk=memory.pk).embedded_at is not None


def test_a_batch_is_encoded_with_one_model_call(alice, monkeypatch):
    memories = [memory_create(owner=alice, body=f"Beach day number {n}") for n in range(20)]
    calls: list[int] = []
    real_embed_texts = embeddings.embed_texts

    def counting(texts: list[str]) -> np.ndarray:
        calls.append(len(texts))
        return real_embed_texts(texts)

    monkeypatch.setattr(embeddings, "embed_texts", counting)
    refresh(*memories)
    assert calls == [20]
    assert Memory.objects.filter(owner=alice, embedded_at__isnull=False).count() == 20


def test_refresh_of_a_deleted_memory_does_nothing(alice):
    memory = memory_create(owner=alice, body=DOG)
    memory_id = str(memory.pk)
    memory.delete()
    tasks.refresh_memories([memory_id])
    tasks.compute_edges([memory_id], True)
    assert not Memory.objects.filter(pk=memory_id).exists()
    assert not MemoryEdge.objects.exists()


def test_sweep_plan_finds_unembedded_memories_once_settled(alice):
    fresh = memory_create(owner=alice, body=DOG)
    settled = memory_create(owner=alice, body=FETCH)
    Memory.objects.filter(pk=settled.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    plan = memory_sweep_plan(batch_size=10, max_memories=100, grace=timedelta(seconds=30))
    assert plan.embed_batches == [[settled.pk]]
    assert fresh.pk not in plan.stale_edges


def test_sweep_plan_finds_stale_edges_and_batches_embeddings(alice):
    memories = [memory_create(owner=alice, body=f"Hike {n}") for n in range(5)]
    refresh(memories[0])
    Memory.objects.filter(pk=memories[0].pk).update(edges_computed_at=None)
    plan = memory_sweep_plan(batch_size=2, max_memories=100, grace=timedelta(0))
    assert [len(batch) for batch in plan.embed_batches] == [2, 2]
    assert {pk for batch in plan.embed_batches for pk in batch} == {m.pk for m in memories[1:]}
    assert plan.stale_edges == [memories[0].pk]


def test_sweep_task_queues_batches_by_id_on_the_bulk_queue(alice, settings, private_broker):
    settings.MEMORY_SWEEP_GRACE = 0
    settings.MEMORY_SWEEP_BATCH_SIZE = 2
    memories = [memory_create(owner=alice, body=f"Concert {n}") for n in range(3)]
    assert tasks.sweep() == 3
    queued = queued_messages(private_broker, "embeddings_bulk")
    assert [name for name, _ in queued] == ["memories.embed_bulk", "memories.embed_bulk"]
    assert sorted(memory_id for _, args in queued for memory_id in args[0]) == sorted(
        str(m.pk) for m in memories
    )
    assert queued_messages(private_broker) == []  # nothing on the default queue


def test_sweep_queues_stale_edges_in_small_groups_on_the_bulk_queue(alice, settings, private_broker):
    settings.MEMORY_SWEEP_GRACE = 0
    settings.MEMORY_EDGES_BULK_BATCH_SIZE = 2
    memories = [memory_create(owner=alice, body=f"Rowing practice {n}") for n in range(5)]
    refresh(*memories)
    # Own lists out of date (never computed, or a worker died before its commit): refreshed
    # with their neighbours. Follow-ups (a neighbour's change): their own lists only.
    Memory.objects.filter(pk__in=[m.pk for m in memories[:3]]).update(edges_computed_at=None)
    Memory.objects.filter(pk__in=[m.pk for m in memories[3:]]).update(edges_computed_at=EDGES_FOLLOW_UP)
    assert tasks.sweep() == 5
    queued = queued_messages(private_broker, "embeddings_bulk")
    assert [(name, len(args[0]), args[1]) for name, args in queued] == [
        ("memories.compute_edges_bulk", 2, True),
        ("memories.compute_edges_bulk", 1, True),
        ("memories.compute_edges_bulk", 2, False),
    ]
    assert {memory_id for _, args in queued[2:] for memory_id in args[0]} == {str(m.pk) for m in memories[3:]}


def test_saves_inside_embeddings_in_bulk_are_queued_as_batches_on_the_bulk_queue(
    alice, settings, private_broker, django_capture_on_commit_callbacks
):
    settings.MEMORY_EMBEDDINGS_BULK_BATCH_SIZE = 2
    with tasks.embeddings_in_bulk():
        with django_capture_on_commit_callbacks(execute=True):
            memories = [memory_create(owner=alice, body=f"Imported entry {n}") for n in range(5)]
        assert queued_messages(private_broker, "embeddings_bulk") == []  # not before the block ends
    queued = queued_messages(private_broker, "embeddings_bulk")
    assert [name for name, _ in queued] == ["memories.embed_bulk"] * 3
    assert [memory_id for _, args in queued for memory_id in args[0]] == [str(m.pk) for m in memories]
    assert queued_messages(private_broker) == []  # no task per memory

    # Outside the block, a save is embedded on its own, on the default queue, at once.
    with django_capture_on_commit_callbacks(execute=True):
        single = memory_create(owner=alice, body="Typed in by hand")
    assert queued_messages(private_broker) == [("memories.refresh_memories", [[str(single.pk)]])]


def test_embeddings_in_bulk_queues_what_was_saved_even_when_the_block_fails(
    alice, private_broker, django_capture_on_commit_callbacks
):
    with pytest.raises(RuntimeError), tasks.embeddings_in_bulk():
        with django_capture_on_commit_callbacks(execute=True):
            memory = memory_create(owner=alice, body="Saved before the failure")
        raise RuntimeError("the import stopped")
    assert queued_messages(private_broker, "embeddings_bulk") == [("memories.embed_bulk", [[str(memory.pk)]])]


def test_embed_bulk_embeds_the_batch_and_queues_edges_in_groups(alice, settings, private_broker):
    settings.MEMORY_EDGES_BULK_BATCH_SIZE = 2
    memories = [memory_create(owner=alice, body=text) for text in (DOG, FETCH, TAXES)]
    already = memories[2]
    refresh(already)

    assert tasks.embed_bulk([str(m.pk) for m in memories]) == 2
    assert not Memory.objects.filter(pk__in=[m.pk for m in memories], embedded_at__isnull=True).exists()
    queued = queued_messages(private_broker, "embeddings_bulk")
    # Edges for what this task embedded, two to a task, invalidating neighbours once.
    assert [(name, sorted(args[0]), args[1]) for name, args in queued] == [
        ("memories.compute_edges_bulk", sorted([str(memories[0].pk), str(memories[1].pk)]), True)
    ]

    tasks.compute_edges_bulk(*queued[0][1])
    assert (str(memories[1].pk), EdgeKind.SIMILAR) in {(t, k) for t, k, _ in edges_of(memories[0])}
    follow_ups = queued_messages(private_broker, "embeddings_bulk")[1:]
    # The neighbours' follow-ups stay on the bulk queue and do not cascade.
    assert all(name == "memories.compute_edges_bulk" and args[1] is False for name, args in follow_ups)
    assert queued_messages(private_broker) == []


def test_save_queues_a_refresh_by_id_after_commit(alice, private_broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(owner=alice, body=DOG)
    with django_capture_on_commit_callbacks(execute=True):
        memory_update(memory=memory, body=DOG, participants=[])
    assert queued_messages(private_broker) == [
        ("memories.refresh_memories", [[str(memory.pk)]]),
        ("memories.compute_edges", [[str(memory.pk)], True]),
    ]


def test_edit_that_changes_nothing_derived_queues_nothing(
    alice, private_broker, django_capture_on_commit_callbacks
):
    memory = memory_create(owner=alice, body=DOG)
    with django_capture_on_commit_callbacks(execute=True):
        memory_update(memory=memory, body=DOG, kind="event")
    assert queued_messages(private_broker) == []


@pytest.mark.django_db(transaction=True)
def test_save_succeeds_with_the_broker_down_and_the_sweep_finds_it_later(alice, settings, caplog):
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        memory = memory_create(owner=alice, body=DOG)
    finally:
        celery_app.conf.broker_url = previous
    assert Memory.objects.filter(pk=memory.pk, embedded_at__isnull=True).exists()
    assert "the sweep will catch up" in caplog.text
    settings.MEMORY_SWEEP_GRACE = 0
    plan = memory_sweep_plan(batch_size=10, max_memories=100, grace=timedelta(0))
    assert plan.embed_batches == [[memory.pk]]
    tasks.refresh_memories([str(pk) for pk in plan.embed_batches[0]])
    assert Memory.objects.get(pk=memory.pk).embedded_at is not None


def test_a_memory_that_enters_a_neighbours_list_without_that_neighbour_in_its_own_invalidates_it(
    alice, settings
):
    # Nearest neighbours are not symmetric: Y's nearest is Z, yet Y is now nearer to X
    # than X's current nearest (Z). Refreshing Y must say X's list is stale too.
    import math

    from memories.services import memory_edges_refresh

    settings.MEMORY_EDGES_SIMILAR_LIMIT = 1

    def at(angle: float) -> Memory:
        memory = memory_create(owner=alice, body=f"a memory at {angle}")
        vector = [math.cos(angle), math.sin(angle)] + [0.0] * 382
        Memory.objects.filter(pk=memory.pk).update(embedding=vector)
        return memory

    x, z = at(0.0), at(0.25)
    memory_edges_refresh(memory_id=x.pk)
    memory_edges_refresh(memory_id=z.pk)
    assert {target for target, _, _ in edges_of(x)} == {str(z.pk)}

    y = at(0.2)
    stale = memory_edges_refresh(memory_id=y.pk)

    assert {target for target, _, _ in edges_of(y)} == {str(z.pk)}  # x is not in y's own list
    assert x.pk in stale
    memory_edges_refresh(memory_id=x.pk)
    assert {target for target, _, _ in edges_of(x)} == {str(y.pk)}


# --- Publishing ---------------------------------------------------------------------------


def test_a_thread_keeps_its_broker_connection_through_a_broker_restart(private_broker):
    assert tasks.enqueue(tasks.refresh_memories, ["first"])
    kept = tasks._publishing_connection()
    assert tasks.enqueue(tasks.refresh_memories, ["second"])
    assert tasks._publishing_connection() is kept

    # The broker drops every client, as a restart does: the next publish reconnects.
    assert private_broker.client_kill_filter(_type="normal", skipme=True) >= 1
    assert tasks.enqueue(tasks.refresh_memories, ["third"])

    elsewhere = {}

    def publish_in_another_thread() -> None:
        elsewhere["sent"] = tasks.enqueue(tasks.refresh_memories, ["fourth"])
        elsewhere["connection"] = tasks._publishing_connection()

    thread = threading.Thread(target=publish_in_another_thread)
    thread.start()
    thread.join()
    assert elsewhere["sent"] and elsewhere["connection"] is not kept
    published = [args[0] for _, args in queued_messages(private_broker)]
    assert published == [["first"], ["second"], ["third"], ["fourth"]]


def test_publishing_follows_the_broker_it_is_pointed_at(private_broker):
    from django.conf import settings

    assert tasks.enqueue(tasks.refresh_memories, ["here"])
    assert queued_messages(private_broker) == [(tasks.refresh_memories.name, [["here"]])]
    elsewhere = broker_url_with_db(settings.REDIS_URL, suite_redis_db(SECOND_OWN_DB))
    other = redis.Redis.from_url(elsewhere)
    other.flushdb()
    celery_app.conf.broker_url = elsewhere
    try:
        assert tasks.enqueue(tasks.refresh_memories, ["there"])
        assert queued_messages(other) == [(tasks.refresh_memories.name, [["there"]])]
        assert len(queued_messages(private_broker)) == 1
    finally:
        other.flushdb()


@pytest.mark.parametrize("queue", ["celery", "embeddings_bulk"])
def test_a_kept_connection_still_delivers_after_the_broker_lost_everything(private_broker, queue, settings):
    # The kept connection declared its queue once; a broker restarted empty has lost
    # the queue and kombu's binding of it, and the message must still land in the queue.
    task = tasks.refresh_memories if queue == "celery" else tasks.embed_bulk
    settings.MEMORY_EMBEDDINGS_BULK_QUEUE = "embeddings_bulk"
    assert tasks.enqueue(task, ["before"])
    private_broker.flushdb()
    assert tasks.enqueue(task, ["after"])
    assert queued_messages(private_broker, queue) == [(task.name, [["after"]])]
