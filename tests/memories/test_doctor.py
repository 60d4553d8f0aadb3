from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from agents.citations import citations_save
from agents.models import AccessLog, AccessSurface, Agent, Conversation, Message, MessageRole
from memories import doctor, retrieval
from memories.doctor import PLACEHOLDER_NAME
from memories.embeddings import MODEL_NAME, embed_texts
from memories.models import EdgeKind, Memory, MemoryEdge, MemoryKind, MemoryParticipant, Sensitivity
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent


def _drop_foreign_keys(*tables: str) -> None:
    """Let the test store rows the ORM and PostgreSQL would refuse.

    DDL is transactional in PostgreSQL: the constraints come back when the
    test's transaction rolls back.
    """
    with connection.cursor() as cursor:
        # Deferred FK checks still queued for rows the fixtures wrote would block the ALTER.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for table in tables:
            cursor.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f'", [table]
            )
            for (name,) in cursor.fetchall():
                cursor.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _embed(*memories: Memory, model: str = MODEL_NAME) -> None:
    vectors = embed_texts([memory.body for memory in memories])
    for memory, vector in zip(memories, vectors, strict=True):
        Memory.objects.filter(pk=memory.pk).update(
            embedding=vector, embedding_model=model, embedded_at=timezone.now()
        )


def _granted(owner, name):
    person = person_create(owner=owner, display_name=name)
    person_set_consent(person=person, status=ConsentStatus.GRANTED, actor=owner)
    return person


def _snapshot() -> dict[str, list[str]]:
    """Every row of every table, as text: what "changes nothing" is checked against."""
    rows = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT row_to_json(t)::text FROM {table} t ORDER BY 1")
            rows[table] = [row[0] for row in cursor.fetchall()]
    return rows


@pytest.fixture
def broken(alice, mallory):
    """Alice's journal with one of every kind of damage doctor knows about."""
    _drop_foreign_keys("memories_memoryedge", "memories_memoryparticipant")
    now = timezone.now()
    bob = _granted(alice, "Bob")
    carol = _granted(alice, "Carol")
    eve = person_create(owner=mallory, display_name="Eve")

    healthy = memory_create(owner=alice, body="Bob taught me to sail", kind=MemoryKind.KNOWLEDGE)
    _embed(healthy)
    stale = memory_create(owner=alice, body="Carol grows tomatoes", kind=MemoryKind.KNOWLEDGE)
    _embed(stale, model="old-model-v0")
    no_vector = memory_create(owner=alice, body="Bob's boat is called Wren", kind=MemoryKind.KNOWLEDGE)

    gone = memory_create(owner=alice, body="Deleted behind the ORM's back", kind=MemoryKind.KNOWLEDGE)
    MemoryEdge.objects.create(owner=alice, source=healthy, target=gone, kind=EdgeKind.SIMILAR, weight=0.9)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memories_memory WHERE id = %s", [gone.pk])
    malloys_memory = memory_create(owner=mallory, body="Mallory's secret plans", kind=MemoryKind.KNOWLEDGE)
    MemoryEdge.objects.create(
        owner=alice, source=healthy, target=malloys_memory, kind=EdgeKind.SIMILAR, weight=0.8
    )

    ghost = memory_create(owner=alice, body="Dinner with someone", kind=MemoryKind.KNOWLEDGE)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO memories_memoryparticipant (memory_id, person_id, role) VALUES (%s, %s, 'subject')",
            [ghost.pk, uuid.uuid4()],
        )
    foreign = memory_create(owner=alice, body="Coffee with a stranger", kind=MemoryKind.KNOWLEDGE)
    MemoryParticipant.objects.create(memory=foreign, person=eve, role="present")

    when = now - timedelta(days=1)
    keeper = memory_create(
        owner=alice,
        body="Sailing with Bob",
        occurred_at=when,
        kind=MemoryKind.KNOWLEDGE,
        sensitivity=Sensitivity.PERSONAL,
        participants=[ParticipantSpec(bob)],
    )
    copy = memory_create(
        owner=alice,
        body="Sailing with Bob",
        occurred_at=when,
        kind=MemoryKind.KNOWLEDGE,
        sensitivity=Sensitivity.SENSITIVE,
        participants=[ParticipantSpec(bob, "present"), ParticipantSpec(carol)],
    )
    Memory.objects.filter(pk=keeper.pk).update(created_at=now - timedelta(hours=2))
    Memory.objects.filter(pk=copy.pk).update(created_at=now - timedelta(hours=1))
    MemoryEdge.objects.create(owner=alice, source=healthy, target=copy, kind=EdgeKind.SIMILAR, weight=0.7)
    AccessLog.objects.create(owner=alice, memory=copy, surface=AccessSurface.API, agent_name="Reviewer")
    conversation = Conversation.objects.create(owner=alice, agent=Agent.objects.filter(owner=alice).first())
    answer = Message.objects.create(
        conversation=conversation, role=MessageRole.ASSISTANT, content="You sailed"
    )
    citations_save(message=answer, memories=[copy])
    both = Message.objects.create(conversation=conversation, role=MessageRole.ASSISTANT, content="Twice")
    citations_save(message=both, memories=[keeper, copy])

    unmarked = memory_create(
        owner=alice, body="Concert in the park", kind=MemoryKind.EVENT, occurred_at=now - timedelta(days=40)
    )
    Memory.objects.filter(pk=unmarked.pk).update(expired_at=None)
    wrong_expiry = memory_create(
        owner=alice, body="Renew the car insurance", kind=MemoryKind.TASK, occurred_at=now
    )
    Memory.objects.filter(pk=wrong_expiry.pk).update(expires_at=None)

    told_by_stranger = memory_create(
        owner=alice, body="Heard the bakery is closing", kind=MemoryKind.KNOWLEDGE
    )
    Memory.objects.filter(pk=told_by_stranger.pk).update(source_person=eve)
    marked_too_soon = memory_create(owner=alice, body="Bob is left-handed", kind=MemoryKind.KNOWLEDGE)
    Memory.objects.filter(pk=marked_too_soon.pk).update(expired_at=now)

    cross_link = memory_create(owner=alice, body="Bob lives in Leeds", kind=MemoryKind.KNOWLEDGE)
    Memory.objects.filter(pk=cross_link.pk).update(superseded_by=malloys_memory)

    # The full-text side's copy (migration 0011), changed behind its triggers' back.
    uncopied = memory_create(owner=alice, body="The lighthouse at dusk", kind=MemoryKind.KNOWLEDGE)
    miscopied = memory_create(owner=alice, body="Pancakes on Sunday", kind=MemoryKind.KNOWLEDGE)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memories_memorytext WHERE memory_id = %s", [uncopied.pk])
        cursor.execute(
            "UPDATE memories_memorytext SET search_vector = to_tsvector('english', 'waffles') "
            "WHERE memory_id = %s",
            [miscopied.pk],
        )

    return {
        "healthy": healthy,
        "stale": stale,
        "no_vector": no_vector,
        "gone": gone,
        "mallorys_memory": malloys_memory,
        "ghost": ghost,
        "foreign": foreign,
        "eve": eve,
        "bob": bob,
        "carol": carol,
        "keeper": keeper,
        "copy": copy,
        "unmarked": unmarked,
        "wrong_expiry": wrong_expiry,
        "cross_link": cross_link,
        "told_by_stranger": told_by_stranger,
        "marked_too_soon": marked_too_soon,
        "uncopied": uncopied,
        "miscopied": miscopied,
    }


def _doctor(*args: str) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command("doctor", *args, stdout=out, stderr=StringIO())
    except CommandError as error:
        return out.getvalue() + str(error), error.returncode
    return out.getvalue(), 0


def test_doctor_without_fix_reports_every_problem_and_changes_nothing(broken):
    before = _snapshot()

    output, code = _doctor("-v", "2")

    assert _snapshot() == before
    assert code == 1
    for line in [
        "✗ 2 edges pointing at a deleted memory or across owners",
        "✗ 2 participants whose person is missing or belongs to another owner",
        "✗ 1 memories whose source person is missing or belongs to another owner",
        "✗ 1 exact duplicate memories",
        "✗ 1 memories marked expired that have not expired",
        "✗ 1 replacement links to itself, another owner or another sensitivity",
        "✗ 1 memories whose expiry does not match their kind",
        "✗ 1 expired memories not yet marked",
        "✗ 1 memories embedded with another model",
        "✗ 2 memories whose copy for full-text search is missing or out of date",
        "problem(s) remain",
    ]:
        assert line in output, output
    assert str(broken["copy"].pk) in output  # -v 2 names the rows


def test_doctor_fix_repairs_everything_and_a_second_run_is_clean(alice, mallory, broken):
    output, code = _doctor("--fix")
    assert code == 0, output
    assert "No problems found." in output

    output, code = _doctor()
    assert (code, "No problems found.") == (0, output.strip().splitlines()[-1])

    # Edges: the dangling and the cross-owner ones are gone.
    edges = MemoryEdge.objects.all()
    assert not edges.filter(target_id=broken["gone"].pk).exists()
    assert not edges.filter(target=broken["mallorys_memory"]).exists()

    # Missing or foreign people become a pending placeholder: agents still cannot see the memory.
    placeholder = Person.objects.get(owner=alice, display_name=PLACEHOLDER_NAME)
    assert placeholder.consent_status == ConsentStatus.PENDING
    for name in ("ghost", "foreign"):
        people = set(
            MemoryParticipant.objects.filter(memory=broken[name]).values_list("person_id", flat=True)
        )
        assert people == {placeholder.pk}
    assert not MemoryParticipant.objects.filter(person=broken["eve"]).exists()
    gated = set(retrieval.agent_visible_memories(alice).values_list("pk", flat=True))
    assert broken["ghost"].pk not in gated
    assert broken["foreign"].pk not in gated
    assert Person.objects.filter(pk=broken["eve"].pk, owner=mallory).exists()
    assert Memory.objects.get(pk=broken["told_by_stranger"].pk).source_person_id == placeholder.pk
    assert broken["told_by_stranger"].pk not in gated

    # Duplicates: the oldest stays, with everyone from both copies and the stricter label.
    assert not Memory.objects.filter(pk=broken["copy"].pk).exists()
    keeper = Memory.objects.get(pk=broken["keeper"].pk)
    assert keeper.sensitivity == Sensitivity.SENSITIVE
    roles = dict(MemoryParticipant.objects.filter(memory=keeper).values_list("person__display_name", "role"))
    assert roles == {"Bob": "subject", "Carol": "subject"}
    # Who saw the copy, and the replies that cited it, now point at the keeper.
    assert list(AccessLog.objects.values_list("memory_id", flat=True)) == [keeper.pk]
    for message in Message.objects.all():
        assert list(message.cited_memories.all()) == [keeper]
        # What each reply was built from follows too: the copy's id is the keeper's now.
        assert set(message.source_ids) == {keeper.pk}

    # Links, expiry and embeddings.
    assert Memory.objects.get(pk=broken["cross_link"].pk).superseded_by_id is None
    assert Memory.objects.get(pk=broken["unmarked"].pk).expired_at is not None
    assert Memory.objects.get(pk=broken["marked_too_soon"].pk).expired_at is None
    wrong_expiry = Memory.objects.get(pk=broken["wrong_expiry"].pk)
    assert wrong_expiry.expires_at == wrong_expiry.occurred_at + timedelta(days=14)
    assert not Memory.objects.filter(embedding__isnull=True).exists()
    assert set(Memory.objects.values_list("embedding_model", flat=True)) == {MODEL_NAME}

    # The full-text copy is whole again, and finds the text the memory holds.
    assert doctor.find_wrong_text_copies() == []
    hits = retrieval.memory_search(
        alice, "lighthouse", query_embedding=[1.0] + [0.0] * 383, relevance=retrieval.NO_CUTOFF
    )
    assert [hit.memory.pk for hit in hits if hit.text_rank is not None] == [broken["uncopied"].pk]

    # Nothing of Mallory's was touched.
    assert Memory.objects.get(pk=broken["mallorys_memory"].pk).body == "Mallory's secret plans"


def test_doctor_on_a_healthy_database_exits_zero(alice):
    memory = memory_create(owner=alice, body="Bob taught me to sail", kind=MemoryKind.KNOWLEDGE)
    _embed(memory)
    output, code = _doctor()
    assert code == 0
    assert "No problems found." in output


def test_doctor_fix_exits_non_zero_while_a_problem_remains(alice):
    """A worker holds the embedding claim: doctor must not compute it twice, and says so."""
    memory = memory_create(owner=alice, body="Bob's boat is called Wren", kind=MemoryKind.KNOWLEDGE)
    Memory.objects.filter(pk=memory.pk).update(embedding_claimed_at=timezone.now())

    output, code = _doctor("--fix")

    assert code == 1
    assert "✗ 1 memories without an embedding" in output.split("After repair:")[-1]
    assert Memory.objects.get(pk=memory.pk).embedding is None
