"""MemoryText: the full-text side's narrow copy of each memory, kept by triggers (migrations 0011, 0012).

Every memory has exactly one row holding its owner, date and search vector, and
whether the agents' count lets it pass, in the same statement as the change:
created one by one or in bulk, edited, re-dated, moved, deleted, its people's
consent changed. A change the copy does not hold (kind, embedding, ...) writes
nothing there.
"""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.db import connection

from memories.models import Memory, MemoryText
from memories.retrieval import memory_search
from memories.services import memory_create

pytestmark = pytest.mark.django_db

MIGRATION = importlib.import_module("memories.migrations.0011_memory_text_for_search")
AGENTS_FLAG = importlib.import_module("memories.migrations.0012_memory_text_agents_open")


def assert_text_exact() -> None:
    """The copy equals its source, row for row (compared in SQL: tsvectors as PostgreSQL sees them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memories_memory m FULL JOIN memories_memorytext t ON t.memory_id = m.id "
            "WHERE m.id IS NULL OR t.memory_id IS NULL OR t.owner_id <> m.owner_id "
            "OR t.occurred_at <> m.occurred_at OR t.search_vector <> m.search_vector"
        )
        assert cursor.fetchone()[0] == 0
        # agents_open (0012) is "the agents' count lets it pass", for every row.
        cursor.execute(
            "SELECT count(*) FROM memories_memorytext t "
            "LEFT JOIN memories_memorygate g ON g.memory_id = t.memory_id "
            "WHERE t.agents_open <> coalesce(g.blocked_count = 0, false)"
        )
        assert cursor.fetchone()[0] == 0


def text_rows_written() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_updated('memories_memorytext'::regclass)"
            " + pg_stat_get_xact_tuples_inserted('memories_memorytext'::regclass)"
        )
        return cursor.fetchone()[0]


def test_created_edited_redated_and_deleted_memories_keep_their_copy(alice, mallory):
    lantern = memory_create(owner=alice, title="Lantern", body="an evening with a lantern")
    Memory.objects.bulk_create(
        [Memory(owner=alice, body=f"harbour walk {n}") for n in range(3)]
        + [Memory(owner=mallory, body="kite")]
    )
    assert MemoryText.objects.count() == 5
    assert_text_exact()

    lantern.body = "a morning by the harbour"
    lantern.save()
    Memory.objects.filter(pk=lantern.pk).update(occurred_at=lantern.occurred_at - timedelta(days=400))
    assert_text_exact()
    assert MemoryText.objects.filter(search_vector="harbour").count() == 4

    Memory.objects.filter(pk=lantern.pk).update(owner=mallory)
    assert MemoryText.objects.get(pk=lantern.pk).owner_id == mallory.pk

    Memory.objects.filter(owner=alice).delete()
    assert MemoryText.objects.count() == 2
    assert_text_exact()


def test_a_change_the_copy_does_not_hold_writes_nothing_there(alice):
    lantern = memory_create(owner=alice, body="an evening with a lantern")
    before = text_rows_written()

    Memory.objects.filter(pk=lantern.pk).update(kind="event", embedding=[0.1] * 384)

    assert text_rows_written() == before
    assert_text_exact()


def test_deleting_an_account_leaves_no_copy(alice, mallory):
    memory_create(owner=alice, body="an evening with a lantern")
    memory_create(owner=mallory, body="a kite")

    alice.delete()

    assert list(MemoryText.objects.values_list("owner_id", flat=True)) == [mallory.pk]
    assert_text_exact()


def test_the_migration_copies_existing_memories_once(alice):
    first = memory_create(owner=alice, body="an evening with a lantern")
    with connection.cursor() as cursor:
        cursor.execute(AGENTS_FLAG.BACKWARD)
        cursor.execute(MIGRATION.BACKWARD)  # as before 0011: no triggers
        cursor.execute("DELETE FROM memories_memorytext")
    second = memory_create(owner=alice, body="a lantern by the harbour")
    assert not MemoryText.objects.exists()

    with connection.cursor() as cursor:
        cursor.execute(MIGRATION.FORWARD)  # the triggers, then the copy of what is there
        cursor.execute(AGENTS_FLAG.FORWARD)  # the agents' flag, set from the gate

    assert set(MemoryText.objects.values_list("pk", flat=True)) == {first.pk, second.pk}
    assert_text_exact()
    memory_create(owner=alice, body="a third lantern")
    assert MemoryText.objects.count() == 3
    assert_text_exact()


def test_search_finds_text_through_the_copy_and_the_gate_still_decides(alice):
    from memories.models import MemoryParticipant
    from people.models import ConsentStatus, Person

    carol = Person.objects.create(owner=alice, display_name="Carol", consent_status=ConsentStatus.PENDING)
    open_one = memory_create(owner=alice, body="an evening with a lantern")
    withheld = memory_create(owner=alice, body="Carol's lantern")
    MemoryParticipant.objects.create(memory=withheld, person=carol, role="present")

    owner_hits = memory_search(alice, "lantern", query_embedding=[1.0] + [0.0] * 383)
    agent_hits = memory_search(alice, "lantern", respect_consent=True, query_embedding=[1.0] + [0.0] * 383)

    assert {hit.memory.pk for hit in owner_hits} == {open_one.pk, withheld.pk}
    assert [hit.memory.pk for hit in agent_hits] == [open_one.pk]


def test_the_agents_flag_follows_consent_people_and_sources(alice):
    from memories.models import MemoryParticipant
    from people.models import ConsentStatus
    from people.services import person_create, person_set_consent

    carol = person_create(owner=alice, display_name="Carol")  # pending
    dan = person_create(owner=alice, display_name="Dan")
    person_set_consent(person=dan, status=ConsentStatus.GRANTED, actor=alice)
    plain = memory_create(owner=alice, body="a lantern")
    with_carol = memory_create(owner=alice, body="Carol's lantern")
    MemoryParticipant.objects.create(memory=with_carol, person=carol, role="present")
    told_by_carol = memory_create(owner=alice, body="Carol told me of a lantern")
    Memory.objects.filter(pk=told_by_carol.pk).update(source_person=carol)
    bulk = Memory.objects.bulk_create([Memory(owner=alice, body=f"lantern {n}") for n in range(3)])
    MemoryParticipant.objects.bulk_create([MemoryParticipant(memory=m, person=dan) for m in bulk])
    assert_text_exact()

    def open_ones() -> set:
        return set(MemoryText.objects.filter(agents_open=True).values_list("pk", flat=True))

    assert open_ones() == {plain.pk, *(m.pk for m in bulk)}
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    assert open_ones() == {plain.pk, with_carol.pk, told_by_carol.pk, *(m.pk for m in bulk)}
    person_set_consent(person=dan, status=ConsentStatus.REVOKED, actor=alice)
    assert open_ones() == {plain.pk, with_carol.pk, told_by_carol.pk}
    MemoryParticipant.objects.filter(memory=bulk[0], person=dan).delete()
    assert open_ones() == {plain.pk, with_carol.pk, told_by_carol.pk, bulk[0].pk}
    assert_text_exact()


def test_agents_rank_only_matches_that_can_pass(alice, monkeypatch):
    # With a broad word the full-text side ranks at most TEXT_CANDIDATES_MAX matches.
    # Agents' candidates are the open ones only (memory_text_open_gin): blocked
    # matches found first (physical order) no longer use up the cap. Before 0012 this
    # returned nothing: the two blocked lanterns were all that got ranked.
    from memories import retrieval
    from memories.models import MemoryParticipant
    from memories.search import settings as search_settings
    from people.services import person_create

    carol = person_create(owner=alice, display_name="Carol")  # pending
    blocked = [memory_create(owner=alice, body=f"lantern number {n}") for n in range(2)]
    MemoryParticipant.objects.bulk_create([MemoryParticipant(memory=m, person=carol) for m in blocked])
    open_one = memory_create(owner=alice, body="a lantern by the harbour")
    monkeypatch.setattr(search_settings, "TEXT_CANDIDATES_MAX", 2)

    hits = memory_search(
        alice,
        "lantern",
        respect_consent=True,
        query_embedding=[1.0] + [0.0] * 383,
        relevance=retrieval.NO_CUTOFF,
    )
    assert [hit.memory.pk for hit in hits] == [open_one.pk]
    assert hits[0].text_rank is not None


def test_a_wrong_agents_flag_never_shows_a_blocked_memory_and_doctor_repairs_it(alice):
    from memories import doctor, retrieval
    from memories.models import MemoryParticipant
    from people.services import person_create

    carol = person_create(owner=alice, display_name="Carol")  # pending
    withheld = memory_create(owner=alice, body="Carol's lantern")
    MemoryParticipant.objects.create(memory=withheld, person=carol, role="present")
    open_one = memory_create(owner=alice, body="a lantern by the harbour")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memories_memorytext SET agents_open = NOT agents_open")

    hits = memory_search(
        alice,
        "lantern",
        respect_consent=True,
        query_embedding=[1.0] + [0.0] * 383,
        relevance=retrieval.NO_CUTOFF,
    )
    assert withheld.pk not in {hit.memory.pk for hit in hits}  # the gate decides
    assert sorted(doctor.find_wrong_text_copies()) == sorted([withheld.pk, open_one.pk])
    doctor.fix_wrong_text_copies(doctor.find_wrong_text_copies())
    assert doctor.find_wrong_text_copies() == []
    assert_text_exact()
    hits = memory_search(
        alice,
        "lantern",
        respect_consent=True,
        query_embedding=[1.0] + [0.0] * 383,
        relevance=retrieval.NO_CUTOFF,
    )
    assert [hit.memory.pk for hit in hits if hit.text_rank is not None] == [open_one.pk]


def _text_rows_read(plan: dict) -> int:
    """Rows of memories_memorytext an EXPLAIN ANALYZE plan read: returned plus removed by a filter."""
    read = 0
    if plan.get("Relation Name") == "memories_memorytext":
        loops = plan.get("Actual Loops", 1)
        read += round((plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)) * loops)
    for child in plan.get("Plans", []):
        read += _text_rows_read(child)
    return read


def test_agents_one_word_search_reads_only_rows_that_can_pass(alice):
    # A word that blocked memories hold once, newest first, and a few open ones hold
    # once, older: the agents' one-word statement walks the rows that can pass by date
    # (memory_text_open_recent, migration 0014), not the owner's every row. Before it,
    # at 99% gated a word held by a few open memories read all 100,000 of an owner's
    # rows (62 ms). Index paths forced, as on a table the planner would not sequential-scan.
    import json

    from django.db import transaction
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from memories import retrieval
    from memories.models import MemoryParticipant
    from people.services import person_create

    carol = person_create(owner=alice, display_name="Carol")  # pending: her memories are blocked
    now = timezone.now()
    open_ones = [
        memory_create(owner=alice, body=f"a lantern, open {n}", occurred_at=now - timedelta(days=400 + n))
        for n in range(3)
    ]
    blocked = Memory.objects.bulk_create(
        Memory(
            owner=alice, body=f"Carol's walk number {n} to the lantern", occurred_at=now - timedelta(days=n)
        )
        for n in range(300)
    )
    MemoryParticipant.objects.bulk_create([MemoryParticipant(memory=m, person=carol) for m in blocked])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memorytext")

    def agents_search() -> list:
        hits = memory_search(
            alice,
            "lantern",
            respect_consent=True,
            query_embedding=[1.0] + [0.0] * 383,
            relevance=retrieval.NO_CUTOFF,
        )
        return [hit.memory.pk for hit in hits]

    with CaptureQueriesContext(connection) as captured:
        assert set(agents_search()) == {m.pk for m in open_ones}
    (statement,) = [q["sql"] for q in captured.captured_queries if "websearch_to_tsquery" in q["sql"]]

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement.replace("%", "%%"))
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    assert "memory_text_open_recent" in json.dumps(plan)
    # Every row read is one that can pass (the three open ones, per branch that reads them).
    assert 0 < _text_rows_read(plan[0]["Plan"]) <= 3 * len(open_ones)
