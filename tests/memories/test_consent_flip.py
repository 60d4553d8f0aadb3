"""Consent flips (issue 14 item 5): one refresh per statement, revocation on the next query.

The gate count is refreshed by a statement-level trigger on people_person
(memories migration 0008): one statement changing several people recounts and
rewrites each of their memories once, and a statement changing nothing the gate
reads writes no gate row. Whatever the agents' vector index still holds (dead
entries until VACUUM), a revoked person's memories are gone from agents' results
on the next query, because the NOT EXISTS gate filters every result.

A grant leaves the memories it opens out of the agents' HNSW index (gate rows
`indexed = false`, migration 0009): memories.index_opened_gates puts them in
after commit. Until it has, the agents' search finds them exactly beside the
index, so they are found on the next query all the same.
"""

from __future__ import annotations

import math

import pytest
from django.db import connection

from memories import gate, gate_index, retrieval, tasks
from memories.gate import agent_visible_memories
from memories.models import Memory, MemoryGate
from memories.retrieval import memory_search
from memories.search import hints, knn, knn_open
from memories.search import settings as search_settings
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_set_consent
from tests.memories.test_gate_counts import assert_counts_exact, assert_indexed_consistent, blocked, person
from tests.memories.test_tasks import private_broker, queued_messages  # noqa: F401 (fixture used by name)

pytestmark = pytest.mark.django_db


def gate_rows_written() -> int:
    """Gate row versions written so far in this transaction (updates and inserts)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated('memories_memorygate'::regclass)"
            " + pg_stat_get_xact_tuples_inserted('memories_memorygate'::regclass)"
        )
        return cursor.fetchone()[0]


def toward(angle: float) -> list[float]:
    return [math.cos(angle), math.sin(angle)] + [0.0] * 382


def embedded(owner, body: str, people: list[Person], angle: float) -> Memory:
    memory = memory_create(owner=owner, body=body, participants=[ParticipantSpec(person=p) for p in people])
    Memory.objects.filter(pk=memory.pk).update(embedding=toward(angle))
    return memory


def test_one_statement_granting_several_people_writes_each_memory_once(alice):
    bob, carol = person(alice, "Bob", ConsentStatus.PENDING), person(alice, "Carol", ConsentStatus.PENDING)
    both = memory_create(
        owner=alice,
        body="the three of us",
        participants=[ParticipantSpec(person=bob), ParticipantSpec(person=carol)],
    )
    bob_only = memory_create(owner=alice, body="Bob's boat", participants=[ParticipantSpec(person=bob)])
    carol_only = memory_create(
        owner=alice, body="Carol's garden", participants=[ParticipantSpec(person=carol)]
    )
    assert (blocked(both), blocked(bob_only), blocked(carol_only)) == (2, 1, 1)
    before = gate_rows_written()

    Person.objects.filter(pk__in=[bob.pk, carol.pk]).update(consent_status=ConsentStatus.GRANTED)

    # Three memories, three new row versions: a trigger per person row would have
    # rewritten `both` twice (2 -> 1 -> 0), each version a new vector-index entry.
    assert gate_rows_written() - before == 3
    assert (blocked(both), blocked(bob_only), blocked(carol_only)) == (0, 0, 0)
    assert set(agent_visible_memories(alice)) == {both, bob_only, carol_only}
    assert_counts_exact()


def test_one_statement_revoking_several_people_hides_their_memories_at_once(alice):
    bob, carol, dan = person(alice, "Bob"), person(alice, "Carol"), person(alice, "Dan")
    both = memory_create(
        owner=alice,
        body="a picnic",
        participants=[ParticipantSpec(person=bob), ParticipantSpec(person=carol)],
    )
    told = memory_create(owner=alice, body="what Carol said", source_person=carol)
    kept = memory_create(owner=alice, body="Dan's song", participants=[ParticipantSpec(person=dan)])

    Person.objects.filter(pk__in=[bob.pk, carol.pk]).update(consent_status=ConsentStatus.REVOKED)

    assert (blocked(both), blocked(told), blocked(kept)) == (2, 1, 0)
    assert set(agent_visible_memories(alice)) == {kept}
    assert_counts_exact()


def test_changes_the_gate_does_not_read_write_no_gate_row(alice):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    memory_create(owner=alice, body="Bob's kite", participants=[ParticipantSpec(person=bob)])
    before = gate_rows_written()

    Person.objects.filter(pk=bob.pk).update(display_name="Robert", notes="likes kites")
    # Pending -> revoked: still not granted.
    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)

    assert gate_rows_written() == before
    assert_counts_exact()


def test_self_flips_in_one_statement_with_other_people_recount_untagged_memories(alice):
    own = Person.objects.get(owner=alice, is_self=True)
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    untagged = memory_create(owner=alice, body="I baked bread")
    with_bob = memory_create(owner=alice, body="Bob and bread", participants=[ParticipantSpec(person=bob)])

    Person.objects.filter(pk__in=[own.pk, bob.pk]).update(consent_status=ConsentStatus.REVOKED)
    assert (blocked(untagged), blocked(with_bob)) == (1, 1)
    Person.objects.filter(pk__in=[own.pk, bob.pk]).update(consent_status=ConsentStatus.GRANTED)
    assert (blocked(untagged), blocked(with_bob)) == (0, 0)
    # Self moving to another person of the same owner (is_self flips on both rows).
    Person.objects.filter(pk=own.pk).update(consent_status=ConsentStatus.PENDING)
    assert blocked(untagged) == 1
    assert_counts_exact()


def agents_ids_through_the_open_index(owner) -> list:
    hits = memory_search(owner, "zzzz", respect_consent=True, query_embedding=toward(0.0), limit=10)
    return [hit.memory.pk for hit in hits]


def test_revocation_hides_memories_on_the_next_query_while_the_index_still_holds_them(alice, monkeypatch):
    # The agents' vector index path, for a small owner: its dead entries stay in the
    # index until VACUUM, and only the NOT EXISTS gate decides what comes back.
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    bob, carol = person(alice, "Bob"), person(alice, "Carol")
    bobs = [embedded(alice, f"Bob {n}", [bob], angle=0.01 * n) for n in range(4)]
    carols = [embedded(alice, f"Carol {n}", [carol], angle=0.5 + 0.01 * n) for n in range(3)]
    assert set(agents_ids_through_the_open_index(alice)) == {m.pk for m in bobs + carols}

    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)

    assert agents_ids_through_the_open_index(alice) == [m.pk for m in carols]
    assert not MemoryGate.objects.filter(memory__in=bobs, blocked_count=0).exists()

    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)

    assert agents_ids_through_the_open_index(alice) == [m.pk for m in bobs + carols]
    assert_counts_exact()


def indexed(memories: list[Memory]) -> set[bool]:
    return set(MemoryGate.objects.filter(memory__in=memories).values_list("indexed", flat=True))


def unindexed_neighbours(owner) -> list:
    """What the agents' index path finds beside the HNSW index: the open rows it does not hold yet."""
    visible = gate._compiled_scope(owner, respect_consent=True)
    rows = knn_open._unindexed_open_neighbours(
        visible, knn._vector_text(toward(0.0)), owner_id=owner.pk, fetch=20
    )
    return [memory_id for memory_id, _ in rows]


@pytest.fixture
def index_path(monkeypatch, unbounded_index_scans):
    """Agents' searches through the open-gate HNSW index (and the exact search beside it)."""
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    monkeypatch.setattr(search_settings, "EXACT_FALLBACK_MAX_MEMORIES", 0)


def test_memories_a_grant_opens_are_found_at_once_and_indexed_by_the_task(alice, index_path):
    bob, carol = person(alice, "Bob", ConsentStatus.PENDING), person(alice, "Carol")
    bobs = [embedded(alice, f"Bob {n}", [bob], angle=0.01 * n) for n in range(4)]
    carols = [embedded(alice, f"Carol {n}", [carol], angle=0.5 + 0.01 * n) for n in range(3)]
    # Embedded while open: in the index at once. Embedded while blocked: not.
    assert (indexed(carols), indexed(bobs)) == ({True}, {False})
    assert agents_ids_through_the_open_index(alice) == [m.pk for m in carols]

    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)

    # Open, but the grant inserted nothing into the HNSW index ...
    assert {blocked(m) for m in bobs} == {0} and indexed(bobs) == {False}
    # ... and the search finds them on the next query, beside it.
    assert unindexed_neighbours(alice) == [m.pk for m in bobs]
    assert agents_ids_through_the_open_index(alice) == [m.pk for m in bobs + carols]

    assert tasks.index_opened_gates(alice.pk) == 4

    assert indexed(bobs) == {True}
    assert unindexed_neighbours(alice) == []  # found through the HNSW index alone now
    assert agents_ids_through_the_open_index(alice) == [m.pk for m in bobs + carols]
    assert tasks.index_opened_gates(alice.pk) == 0  # run again: nothing to do
    assert_counts_exact()
    assert_indexed_consistent()


def test_before_the_task_a_filter_that_drops_the_nearest_opened_memories_still_gets_the_right_ones(
    alice, index_path, monkeypatch
):
    # Beside the index, the opened rows are ranked by their half-precision copies and
    # only the nearest few per result asked go through the gate and the filters; here
    # all of those are events and the search asks for knowledge.
    from memories.selectors import MemoryFilters

    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_OVERFETCH", 1)
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    for n in range(8):
        memory = embedded(alice, f"Bob {n}", [bob], angle=0.01 * n)
        Memory.objects.filter(pk=memory.pk).update(kind="event")
    wanted = [embedded(alice, f"recipe {n}", [bob], angle=1.0 + 0.1 * n) for n in range(2)]
    Memory.objects.filter(pk__in=[m.pk for m in wanted]).update(kind="knowledge")
    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)
    assert indexed(wanted) == {False}

    hits = memory_search(
        alice,
        "zzzz",
        respect_consent=True,
        limit=2,
        filters=MemoryFilters(kind="knowledge"),
        query_embedding=toward(0.0),
    )

    assert [hit.memory.pk for hit in hits] == [m.pk for m in wanted]


@pytest.mark.parametrize("task_ran", [False, True])
def test_revocation_is_immediate_whether_or_not_the_task_has_indexed_the_grant(alice, index_path, task_ran):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    bobs = [embedded(alice, f"Bob {n}", [bob], angle=0.01 * n) for n in range(3)]
    kept = embedded(alice, "mine", [], angle=0.4)
    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)
    if task_ran:
        tasks.index_opened_gates(alice.pk)
    assert agents_ids_through_the_open_index(alice) == [m.pk for m in bobs] + [kept.pk]

    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)

    assert agents_ids_through_the_open_index(alice) == [kept.pk]
    assert indexed(bobs) == {False}  # a later grant will not insert them synchronously either
    assert unindexed_neighbours(alice) == []
    assert_indexed_consistent()


def test_a_new_embedding_on_an_open_memory_is_indexed_at_once_and_a_lost_one_leaves(alice):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    own = memory_create(owner=alice, body="a walk")
    with_bob = memory_create(owner=alice, body="Bob's walk", participants=[ParticipantSpec(person=bob)])
    assert (indexed([own]), indexed([with_bob])) == ({False}, {False})  # nothing to index yet

    Memory.objects.filter(pk__in=[own.pk, with_bob.pk]).update(embedding=toward(0.2))
    assert (indexed([own]), indexed([with_bob])) == ({True}, {False})

    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)
    assert indexed([with_bob]) == {False}  # opened by a grant: left to the task
    # The worker storing a new vector (the text was edited) indexes an open row at once.
    Memory.objects.filter(pk=with_bob.pk).update(embedding=toward(0.3))
    assert indexed([with_bob]) == {True}
    # The text edited: no vector, out of the index.
    Memory.objects.filter(pk=own.pk).update(embedding=None)
    assert indexed([own]) == {False}
    assert_indexed_consistent()


def test_the_sweep_indexes_every_owner_and_a_long_backlog_is_handed_to_a_fresh_task(
    alice,
    mallory,
    monkeypatch,
    settings,
    private_broker,  # noqa: F811
):
    # The module the task calls (whatever the test module imported).
    monkeypatch.setattr(tasks.gate_index, "INDEX_BATCH_SIZE", 2)
    monkeypatch.setattr(tasks, "GATE_INDEX_RUN_SECONDS", 0)
    bob, dan = person(alice, "Bob", ConsentStatus.PENDING), person(mallory, "Dan", ConsentStatus.PENDING)
    opened = [embedded(alice, f"Bob {n}", [bob], angle=0.1 * n) for n in range(3)]
    opened += [embedded(mallory, f"Dan {n}", [dan], angle=0.1 * n) for n in range(2)]
    Person.objects.filter(pk__in=[bob.pk, dan.pk]).update(consent_status=ConsentStatus.GRANTED)
    assert indexed(opened) == {False}

    # One batch (the time is up at once), then a fresh task on the bulk queue for the rest.
    assert tasks.index_opened_gates() == 2
    assert queued_messages(private_broker, settings.MEMORY_EMBEDDINGS_BULK_QUEUE) == [
        ("memories.index_opened_gates", [None])
    ]
    assert queued_messages(private_broker) == []
    assert tasks.index_opened_gates() == 2
    assert tasks.index_opened_gates() == 1  # a short batch: done, nothing queued
    assert len(queued_messages(private_broker, settings.MEMORY_EMBEDDINGS_BULK_QUEUE)) == 2
    assert indexed(opened) == {True}
    assert_indexed_consistent()


def test_a_grant_queues_the_indexing_after_commit_on_the_bulk_queue(
    alice,
    settings,
    private_broker,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    embedded(alice, "Bob's kite", [bob], angle=0.1)

    with django_capture_on_commit_callbacks(execute=True):
        person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)
    assert queued_messages(private_broker, settings.MEMORY_EMBEDDINGS_BULK_QUEUE) == []
    with django_capture_on_commit_callbacks(execute=True):
        person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)

    assert queued_messages(private_broker, settings.MEMORY_EMBEDDINGS_BULK_QUEUE) == [
        ("memories.index_opened_gates", [alice.pk])
    ]
    beat = [
        entry
        for entry in settings.CELERY_BEAT_SCHEDULE.values()
        if entry["task"] == tasks.index_opened_gates.name
    ]
    assert beat and beat[0]["options"]["queue"] == settings.MEMORY_EMBEDDINGS_BULK_QUEUE


def test_the_task_indexes_no_blocked_row(alice):
    bob, carol = person(alice, "Bob", ConsentStatus.PENDING), person(alice, "Carol", ConsentStatus.PENDING)
    bobs = [embedded(alice, f"Bob {n}", [bob], angle=0.1 * n) for n in range(2)]
    carols = [embedded(alice, f"Carol {n}", [carol], angle=0.1 * n) for n in range(2)]
    Person.objects.filter(pk__in=[bob.pk, carol.pk]).update(consent_status=ConsentStatus.GRANTED)
    # A row changed behind the triggers' back to look open-and-unindexed but blocked
    # stays out: the claim re-checks blocked_count.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memorygate SET blocked_count = 1 WHERE memory_id = %s", [carols[0].pk]
        )

    assert gate_index.gate_rows_index_opened(owner_id=alice.pk) == (3, False)
    assert indexed(bobs) == {True} and indexed([carols[0]]) == {False} and indexed([carols[1]]) == {True}


@pytest.mark.django_db(transaction=True)
def test_the_task_skips_a_row_a_consent_change_holds_instead_of_waiting_for_it():
    import threading

    from django.db import transaction

    from tests.factories import UserFactory

    owner = UserFactory()
    bob = person(owner, "Bob", ConsentStatus.PENDING)
    held, *others = [embedded(owner, f"Bob {n}", [bob], angle=0.1 * n) for n in range(3)]
    Person.objects.filter(pk=bob.pk).update(consent_status=ConsentStatus.GRANTED)
    locked, release = threading.Event(), threading.Event()

    def hold_the_row() -> None:
        # What a refresh does first: lock the gate row, then count.
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM memories_memorygate WHERE memory_id = %s FOR UPDATE", [held.pk])
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_row)
    holder.start()
    try:
        assert locked.wait(10)
        assert gate_index.gate_rows_index_opened(owner_id=owner.pk) == (2, False)
    finally:
        release.set()
        holder.join()

    assert indexed(others) == {True} and indexed([held]) == {False}
    assert gate_index.gate_rows_index_opened(owner_id=owner.pk) == (1, False)  # the next run takes it
    assert indexed([held]) == {True}


def test_the_open_hint_is_fresh_up_to_the_exact_path_and_a_kept_width_hint_above_it(alice, monkeypatch):
    # Past EXACT_CANDIDATES_MAX the count only tunes the index scan, so it is kept a
    # while; at or below it (none open, the exact path) every search counts afresh,
    # and whether open rows wait for the agents' index is asked every time.
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 1)
    bob, carol = person(alice, "Bob"), person(alice, "Carol", ConsentStatus.PENDING)
    bobs = [embedded(alice, f"Bob {n}", [bob], angle=0.01 * n) for n in range(3)]
    carols = [embedded(alice, f"Carol {n}", [carol], angle=0.5 + 0.01 * n) for n in range(2)]
    assert hints._open_hint(alice.pk) == (3, False)

    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    # Two more open and not yet indexed: the width hint is the kept one, the backlog is news.
    assert hints._open_hint(alice.pk) == (3, True)
    retrieval.forget_hints()
    assert hints._open_hint(alice.pk) == (5, True)
    assert tasks.index_opened_gates(alice.pk) == 2
    assert hints._open_hint(alice.pk) == (5, False)

    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)
    person_set_consent(person=carol, status=ConsentStatus.REVOKED, actor=alice)
    assert hints._open_hint(alice.pk) == (0, False)  # counted afresh: nothing kept says otherwise
    assert memory_search(alice, "Bob", respect_consent=True, query_embedding=toward(0.0)) == []
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    assert hints._open_hint(alice.pk) == (5, True)  # 2 open, past the exact path: the kept 5
    # Whatever the hint says, the gate decides: Carol's memories only, found before the task runs.
    hits = memory_search(alice, "zzzz", respect_consent=True, query_embedding=toward(0.5), limit=10)
    assert {hit.memory.pk for hit in hits} == {m.pk for m in carols}
    assert not {m.pk for m in bobs} & {hit.memory.pk for hit in hits}


def test_a_big_recent_open_count_is_not_asked_again_and_the_scan_probes_the_backlog(
    alice, index_path, monkeypatch
):
    from django.test.utils import CaptureQueriesContext

    # Scaled down: past OPEN_HINT_TRUSTED_ABOVE (2) the kept count stands for
    # HINT_TTL_SECONDS and the hint asks nothing: whether open rows wait for the
    # agents' index is asked by the statement that sets the index scan's settings.
    monkeypatch.setattr(search_settings, "OPEN_HINT_TRUSTED_ABOVE", 2)
    bob, carol = person(alice, "Bob"), person(alice, "Carol", ConsentStatus.PENDING)
    bobs = {embedded(alice, f"Bob {n}", [bob], angle=0.01 * n).pk for n in range(3)}
    carols = {embedded(alice, f"Carol {n}", [carol], angle=0.5 + 0.01 * n).pk for n in range(2)}
    assert hints._open_hint(alice.pk) == (3, False)
    with CaptureQueriesContext(connection) as queries:
        assert hints._open_hint(alice.pk) == (3, None)
    assert queries.captured_queries == []

    def search(angle: float, words: str = "zzzz") -> tuple[set, list[str]]:
        with CaptureQueriesContext(connection) as queries:
            hits = memory_search(
                alice,
                words,
                respect_consent=True,
                query_embedding=toward(angle),
                limit=10,
                relevance=retrieval.NO_CUTOFF,
            )
        probes = [query["sql"] for query in queries.captured_queries if "NOT indexed" in query["sql"]]
        return {hit.memory.pk for hit in hits}, probes

    found, probes = search(0.0)
    # One probe, in the settings' statement; it found no backlog, so nothing is searched beside the index.
    assert found == bobs
    assert len(probes) == 1 and "set_config('hnsw.ef_search'" in probes[0]

    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    assert hints._open_hint(alice.pk) == (3, None)  # the kept count
    found, probes = search(0.5)
    # The probe saw the backlog: Carol's memories are found before the task indexes them.
    assert found == bobs | carols
    assert len(probes) == 2 and "set_config('hnsw.ef_search'" in probes[0]

    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)
    person_set_consent(person=carol, status=ConsentStatus.REVOKED, actor=alice)
    assert hints._open_hint(alice.pk) == (3, None)  # nothing open now: the kept count says 3
    # ... and the gate decides: nothing shown, whatever the count says.
    assert search(0.0, "Bob")[0] == set() and search(0.5, "Carol")[0] == set()
    # Once the kept count is old, it is counted afresh.
    monkeypatch.setattr(search_settings, "HINT_TTL_SECONDS", -1.0)
    assert hints._open_hint(alice.pk) == (0, False)


def test_an_owner_found_big_is_not_sized_again_and_one_that_shrank_still_gets_the_answer(alice, monkeypatch):
    from django.test.utils import CaptureQueriesContext

    # Scaled down: past 2 memories the owner's searches go through the index.
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 2)
    walks = [embedded(alice, f"Walk {n}", [], angle=0.01 * n) for n in range(4)]

    def sized() -> tuple[int, set]:
        with CaptureQueriesContext(connection) as queries:
            hits = memory_search(alice, "walk", query_embedding=toward(0.0), limit=10)
        size = (
            f"SELECT count(*) FROM (SELECT 1 FROM memories_memory WHERE owner_id = {alice.pk} LIMIT 3) mine"
        )
        counts = [q for q in queries.captured_queries if q["sql"] == size]
        return len(counts), {hit.memory.pk for hit in hits}

    assert sized() == (1, {m.pk for m in walks})
    assert sized() == (0, {m.pk for m in walks})  # found big a moment ago: kept
    Memory.objects.filter(pk__in=[m.pk for m in walks[1:]]).delete()
    # Still "big" for HINT_TTL_SECONDS: the index path, whose short answer ends exact.
    assert sized() == (0, {walks[0].pk})
    monkeypatch.setattr(search_settings, "HINT_TTL_SECONDS", -1.0)
    assert sized() == (1, {walks[0].pk})
    assert sized() == (1, {walks[0].pk})  # "small" is asked again every time


def test_agents_search_skips_the_backlog_probe_when_the_hint_says_there_is_none(alice, index_path):
    from django.test.utils import CaptureQueriesContext

    bob = person(alice, "Bob")
    bobs = [embedded(alice, f"Bob {n}", [bob], angle=0.01 * n) for n in range(3)]
    with CaptureQueriesContext(connection) as queries:
        hits = memory_search(alice, "zzzz", respect_consent=True, query_embedding=toward(0.0), limit=3)
    assert [hit.memory.pk for hit in hits] == [m.pk for m in bobs]
    probes = [q["sql"] for q in queries.captured_queries if "NOT indexed" in q["sql"]]
    assert len(probes) == 1 and probes[0].startswith("SELECT (SELECT count(*)")  # the hint's own EXISTS

    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)
    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)  # a backlog now
    with CaptureQueriesContext(connection) as queries:
        hits = memory_search(alice, "zzzz", respect_consent=True, query_embedding=toward(0.0), limit=3)
    assert [hit.memory.pk for hit in hits] == [m.pk for m in bobs]
    assert len([q for q in queries.captured_queries if "NOT indexed" in q["sql"]]) == 2


def _plan_nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def test_indexing_a_big_grant_reads_the_claimed_rows_once_whatever_the_statistics_say(alice):
    # Statistics taken while everything was blocked (ANALYZE, as autovacuum may run
    # just after a mass revoke) say no row is open; then a grant opens them all and one
    # batch claims them all (bench_retrieval's batch). As a join the planner expected
    # one row and read the claimed list again for every open row (a nested loop:
    # 10^10 comparisons at 100,000 rows); the claimed ids must be read once.
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    for index in range(150):
        embedded(alice, f"with Bob {index}", [bob], angle=index / 150)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memorygate")
    Person.objects.filter(pk=bob.pk).update(consent_status=ConsentStatus.GRANTED)
    assert MemoryGate.objects.filter(owner=alice, blocked_count=0, indexed=False).count() == 150

    sql, params = gate_index._claim_and_index(alice.pk, 10**9)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0][0]["Plan"]

    claimed_reads = [node for node in _plan_nodes(plan) if node["Node Type"] == "CTE Scan"]
    assert claimed_reads and all(node["Actual Loops"] == 1 for node in claimed_reads), plan
    assert not MemoryGate.objects.filter(owner=alice, blocked_count=0, indexed=False).exists()
    assert_indexed_consistent()
