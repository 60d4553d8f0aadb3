"""The maintained gate count (memories_memorygate.blocked_count) and the fail-closed gate.

The count, and the half-precision copy of the embedding beside it that feeds
the agents' vector index, are written only by database triggers (migrations
0004 and 0005). These tests
change participants, consent, source people and memories through the services,
the ORM and raw SQL, and compare every count with a recomputation in plain Python
from the rows themselves. A separate test shows the gate hides a memory whose
participant has lost its person row (FK bypassed), and that the count agrees.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories.gate import agent_visible_memories
from memories.gate_index import gate_rows_index_opened
from memories.models import Memory, MemoryGate, MemoryParticipant
from memories.retrieval import memory_search
from memories.services import ParticipantSpec, memory_create, memory_delete, memory_update
from people.models import ConsentStatus, Person
from people.services import PersonInUse, person_delete, person_set_consent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def expected_counts() -> dict:
    """blocked_count recomputed from the rows, independently of the triggers."""
    granted = set(Person.objects.filter(consent_status=ConsentStatus.GRANTED).values_list("pk", flat=True))
    granted_self_owners = set(
        Person.objects.filter(is_self=True, consent_status=ConsentStatus.GRANTED).values_list(
            "owner_id", flat=True
        )
    )
    counts = {}
    untagged = {}
    for memory_id, source_id, owner_id in Memory.objects.values_list("pk", "source_person_id", "owner_id"):
        counts[memory_id] = int(source_id is not None and source_id not in granted)
        untagged[memory_id] = owner_id not in granted_self_owners
    for memory_id, person_id in MemoryParticipant.objects.values_list("memory_id", "person_id"):
        counts[memory_id] += person_id not in granted
        untagged[memory_id] = False
    # A memory with nobody in it counts its owner's Self as its participant.
    return {memory_id: count + untagged[memory_id] for memory_id, count in counts.items()}


def stored_counts() -> dict:
    return dict(MemoryGate.objects.values_list("memory_id", "blocked_count"))


def assert_counts_exact() -> None:
    assert stored_counts() == expected_counts()


def assert_copies_exact() -> None:
    """Every gate row holds its memory's embedding at half precision, or NULL with it."""
    copies = {
        memory_id: None if copy is None else np.asarray(copy, dtype=np.float16)
        for memory_id, copy in MemoryGate.objects.values_list("memory_id", "embedding")
    }
    originals = dict(Memory.objects.values_list("pk", "embedding"))
    assert copies.keys() == originals.keys()
    for memory_id, original in originals.items():
        if original is None:
            assert copies[memory_id] is None
        else:
            assert same_at_half_precision(copies[memory_id], original)


def same_at_half_precision(copy, original) -> bool:
    # The database rounds float4 -> float2 itself; allow one unit in the last place.
    expected = np.asarray(original, dtype=np.float32).astype(np.float16)
    return copy is not None and np.allclose(copy, expected, rtol=1e-3, atol=1e-6)


def assert_indexed_consistent() -> None:
    """Only open rows with a vector are in the agents' index (`indexed`, migration 0009)."""
    wrongly_indexed = MemoryGate.objects.filter(indexed=True).exclude(
        blocked_count=0, embedding__isnull=False
    )
    assert not wrongly_indexed.exists()


def unit(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(384)
    return (vector / np.linalg.norm(vector)).tolist()


def person(owner, name: str, status: str = ConsentStatus.GRANTED) -> Person:
    return Person.objects.create(owner=owner, display_name=name, consent_status=status)


def blocked(memory: Memory) -> int:
    return MemoryGate.objects.get(memory=memory).blocked_count


def test_new_memory_gets_a_count_of_its_ungranted_participants_and_source(alice):
    bob, carol = person(alice, "Bob", ConsentStatus.PENDING), person(alice, "Carol")
    dan = person(alice, "Dan", ConsentStatus.REVOKED)

    solo = memory_create(owner=alice, body="alone by the lake")
    mixed = memory_create(
        owner=alice,
        body="dinner with everyone",
        source_person=dan,
        participants=[ParticipantSpec(person=bob), ParticipantSpec(person=carol)],
    )

    assert blocked(solo) == 0
    assert blocked(mixed) == 2  # Bob pending + Dan (the source) revoked
    assert_counts_exact()


def test_adding_and_removing_participants_moves_the_count(alice):
    bob, carol = person(alice, "Bob", ConsentStatus.PENDING), person(alice, "Carol")
    memory = memory_create(owner=alice, body="a walk")

    MemoryParticipant.objects.create(memory=memory, person=bob)
    assert blocked(memory) == 1
    MemoryParticipant.objects.create(memory=memory, person=carol)
    assert blocked(memory) == 1
    MemoryParticipant.objects.filter(memory=memory, person=bob).delete()
    assert blocked(memory) == 0
    # Re-pointing a participant row at someone else (UPDATE) counts too.
    MemoryParticipant.objects.filter(memory=memory, person=carol).update(person=bob)
    assert blocked(memory) == 1
    assert_counts_exact()


def test_consent_changes_recount_every_memory_of_that_person(alice):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    told = memory_create(owner=alice, body="what Bob told me", source_person=bob)
    present = [
        memory_create(owner=alice, body=f"evening {n}", participants=[ParticipantSpec(person=bob)])
        for n in range(3)
    ]
    assert {blocked(told), *map(blocked, present)} == {1}

    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)
    assert {blocked(told), *map(blocked, present)} == {0}
    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)
    assert {blocked(told), *map(blocked, present)} == {1}
    # pending <-> revoked: still not granted, still 1.
    person_set_consent(person=bob, status=ConsentStatus.PENDING, actor=alice)
    assert {blocked(told), *map(blocked, present)} == {1}
    assert_counts_exact()


def test_memory_update_replacing_participants_and_source_recounts(alice):
    bob, carol = person(alice, "Bob", ConsentStatus.PENDING), person(alice, "Carol")
    memory = memory_create(owner=alice, body="a trip", participants=[ParticipantSpec(person=bob)])
    assert blocked(memory) == 1

    memory_update(memory=memory, body="a trip", participants=[ParticipantSpec(person=carol)])
    assert blocked(memory) == 0
    memory_update(memory=memory, body="a trip", source_person=bob, participants=None)
    assert blocked(memory) == 1
    memory_update(memory=memory, body="a trip", source_person=carol, participants=None)
    assert blocked(memory) == 0
    assert_counts_exact()


def test_refused_person_deletion_leaves_the_count_alone(alice):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    memory = memory_create(owner=alice, body="lunch", participants=[ParticipantSpec(person=bob)])

    with pytest.raises(PersonInUse):
        person_delete(person=bob)

    assert blocked(memory) == 1
    assert_counts_exact()


def test_deleting_a_memory_removes_its_count_row(alice):
    memory = memory_create(owner=alice, body="gone soon")
    memory_delete(memory=memory)
    assert not MemoryGate.objects.filter(memory_id=memory.pk).exists()
    assert_counts_exact()


def _orphan_participant(owner, status: str) -> Memory:
    """A memory whose participant's person row is gone, as raw SQL with the FK dropped could leave it."""
    ghost = person(owner, "Ghost", status)
    memory = memory_create(
        owner=owner, body="a lantern by the river", participants=[ParticipantSpec(person=ghost)]
    )
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks: ALTER needs none
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'memories_memoryparticipant'::regclass "
            "AND confrelid = 'people_person'::regclass AND contype = 'f'"
        )
        (constraint,) = cursor.fetchone()
        # DDL is transactional: the test's rollback restores the constraint.
        cursor.execute(f'ALTER TABLE memories_memoryparticipant DROP CONSTRAINT "{constraint}"')
        cursor.execute("DELETE FROM people_personconsent WHERE person_id = %s", [ghost.pk])
        cursor.execute("DELETE FROM people_person WHERE id = %s", [ghost.pk])
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    assert MemoryParticipant.objects.filter(memory=memory).exists()
    assert not Person.objects.filter(pk=ghost.pk).exists()
    return memory


@pytest.mark.parametrize("status", [ConsentStatus.GRANTED, ConsentStatus.PENDING])
def test_participant_without_a_person_row_fails_closed(alice, status):
    memory = _orphan_participant(alice, status)

    assert not agent_visible_memories(alice).filter(pk=memory.pk).exists()
    agent_hits = memory_search(alice, "lantern", respect_consent=True, query_embedding=[1.0] + [0.0] * 383)
    assert memory.pk not in [hit.memory.pk for hit in agent_hits]
    # The owner still sees it, and the count agrees that something blocks it.
    assert agent_visible_memories(alice).count() == 0
    assert Memory.objects.filter(owner=alice, pk=memory.pk).exists()
    assert blocked(memory) == 1
    assert_counts_exact()


# --- the embedding copy that feeds the agents' vector index --------------------------


def copy_of(memory: Memory):
    copy = MemoryGate.objects.get(memory=memory).embedding
    return None if copy is None else np.asarray(copy, dtype=np.float16)


def test_the_gate_row_follows_the_memorys_embedding(alice):
    memory = memory_create(owner=alice, body="a lantern by the river")
    assert copy_of(memory) is None  # saved; the worker has not embedded it yet

    # The worker's conditional write (a queryset update) ...
    Memory.objects.filter(pk=memory.pk).update(embedding=unit(1))
    assert same_at_half_precision(copy_of(memory), unit(1))
    # ... a model save, which writes every column ...
    memory.refresh_from_db()
    memory.embedding = unit(2)
    memory.save()
    assert same_at_half_precision(copy_of(memory), unit(2))
    # ... and raw SQL all reach the copy.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memories_memory SET embedding = NULL WHERE id = %s", [memory.pk])
    assert copy_of(memory) is None
    assert_copies_exact()


def test_editing_the_text_clears_the_copy_until_the_worker_embeds_it_again(alice):
    memory = memory_create(owner=alice, body="a lantern by the river")
    Memory.objects.filter(pk=memory.pk).update(embedding=unit(3))
    memory.refresh_from_db()

    memory_update(memory=memory, body="a candle by the lake")

    # A stale vector would let agents find the memory by what it no longer says.
    assert copy_of(memory) is None
    assert_copies_exact()


def test_consent_changes_keep_the_copy(alice):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    memory = memory_create(owner=alice, body="dinner", participants=[ParticipantSpec(person=bob)])
    Memory.objects.filter(pk=memory.pk).update(embedding=unit(4))

    for status in (ConsentStatus.GRANTED, ConsentStatus.REVOKED, ConsentStatus.GRANTED):
        person_set_consent(person=bob, status=status, actor=alice)
        assert same_at_half_precision(copy_of(memory), unit(4))
    assert_counts_exact()
    assert_copies_exact()


# --- property: any sequence of changes leaves every count exact -------------------------

STATUSES = [ConsentStatus.GRANTED, ConsentStatus.PENDING, ConsentStatus.REVOKED]
operation = st.one_of(
    st.tuples(
        st.just("create"), st.lists(st.integers(0, 5), max_size=3, unique=True), st.none() | st.integers(0, 5)
    ),
    st.tuples(st.just("consent"), st.integers(0, 5), st.sampled_from(STATUSES)),
    st.tuples(st.just("self_consent"), st.none(), st.sampled_from(STATUSES)),
    st.tuples(st.just("replace"), st.integers(0, 9), st.lists(st.integers(0, 5), max_size=3, unique=True)),
    st.tuples(st.just("source"), st.integers(0, 9), st.none() | st.integers(0, 5)),
    st.tuples(st.just("add"), st.integers(0, 9), st.integers(0, 5)),
    st.tuples(st.just("remove"), st.integers(0, 9), st.integers(0, 5)),
    st.tuples(st.just("delete_memory"), st.integers(0, 9), st.none()),
    st.tuples(st.just("delete_person"), st.integers(0, 5), st.none()),
    st.tuples(st.just("embed"), st.integers(0, 9), st.none() | st.integers(0, 3)),
    st.tuples(st.just("index"), st.none(), st.none()),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    statuses=st.lists(st.sampled_from(STATUSES), min_size=6, max_size=6),
    operations=st.lists(operation, max_size=12),
)
def test_counts_and_copies_stay_exact_under_any_sequence_of_changes(statuses, operations):
    from django.db import transaction

    with transaction.atomic():
        owner = UserFactory()
        people = [person(owner, f"P{n}", status) for n, status in enumerate(statuses)]
        memories: list[Memory] = []

        def pick(index: int) -> Memory | None:
            return memories[index % len(memories)] if memories else None

        for name, first, second in operations:
            blocked_before = set(
                MemoryGate.objects.filter(owner=owner, blocked_count__gt=0).values_list(
                    "memory_id", flat=True
                )
            )
            if name == "create":
                memories.append(
                    memory_create(
                        owner=owner,
                        body="a day",
                        source_person=None if second is None else people[second],
                        participants=[ParticipantSpec(person=people[n]) for n in first],
                    )
                )
            elif name == "consent":
                person_set_consent(person=people[first], status=second, actor=owner)
                # What a consent change opens stays out of the agents' HNSW index (the
                # task puts it in, off the request).
                opened = MemoryGate.objects.filter(memory_id__in=blocked_before, blocked_count=0)
                assert not opened.filter(indexed=True).exists()
            elif name == "index":
                gate_rows_index_opened(owner_id=owner.pk)
                assert not MemoryGate.objects.filter(
                    owner=owner, blocked_count=0, embedding__isnull=False, indexed=False
                ).exists()
            elif name == "self_consent":
                own = Person.objects.get(owner=owner, is_self=True)
                person_set_consent(person=own, status=second, actor=owner)
            elif name == "delete_person":
                try:
                    with transaction.atomic():
                        person_delete(person=people[first])
                except PersonInUse:
                    pass
                else:
                    people[first] = person(owner, f"P{first}b", ConsentStatus.PENDING)
            elif (memory := pick(first)) is None:
                continue
            elif name == "replace":
                memory.refresh_from_db()
                memory_update(
                    memory=memory,
                    body="a day",
                    source_person=memory.source_person,
                    participants=[ParticipantSpec(person=people[n]) for n in second],
                )
            elif name == "source":
                memory.refresh_from_db()
                memory_update(
                    memory=memory, body="a day", source_person=None if second is None else people[second]
                )
            elif name == "add":
                MemoryParticipant.objects.get_or_create(memory=memory, person=people[second])
            elif name == "remove":
                MemoryParticipant.objects.filter(memory=memory, person=people[second]).delete()
            elif name == "delete_memory":
                memory_delete(memory=memory)
                memories.remove(memory)
            elif name == "embed":
                old_copy = copy_of(memory)
                Memory.objects.filter(pk=memory.pk).update(embedding=None if second is None else unit(second))
                gate = MemoryGate.objects.get(memory=memory)
                if (
                    gate.blocked_count == 0
                    and second is not None
                    and not same_at_half_precision(old_copy, unit(second))
                ):
                    assert gate.indexed  # a new vector on an open memory: indexed at once
            assert_counts_exact()
            assert_copies_exact()
            assert_indexed_consistent()
        # And the count agrees with the authoritative gate: 0 exactly when the
        # participants/source part of the gate lets the memory through.
        open_ids = set(
            MemoryGate.objects.filter(owner=owner, blocked_count=0).values_list("memory_id", flat=True)
        )
        assert set(agent_visible_memories(owner).values_list("pk", flat=True)) == open_ids
        transaction.set_rollback(True)


# --- the count is a hint: a wrong count can make a result smaller, never leak -------------


def _force_count(memory: Memory, value: int) -> None:
    # Written behind the triggers' back, as a bug or a manual edit might.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memorygate SET blocked_count = %s WHERE memory_id = %s", [value, memory.pk]
        )


def _agent_search(owner) -> list:
    hits = memory_search(owner, "lantern", respect_consent=True, query_embedding=[1.0] + [0.0] * 383)
    return [hit.memory.pk for hit in hits]


def test_a_count_too_low_does_not_show_a_blocked_memory(alice):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    secret = memory_create(owner=alice, body="a lantern for Bob", participants=[ParticipantSpec(person=bob)])
    Memory.objects.filter(pk=secret.pk).update(embedding=[1.0] + [0.0] * 383)
    _force_count(secret, 0)

    assert secret.pk not in _agent_search(alice)
    assert _agent_search(alice) == []


def test_a_count_too_high_only_makes_the_result_smaller(alice):
    shown = memory_create(owner=alice, body="a lantern on the porch")
    Memory.objects.filter(pk=shown.pk).update(embedding=[1.0] + [0.0] * 383)
    assert _agent_search(alice) == [shown.pk]

    _force_count(shown, 1)

    assert _agent_search(alice) == []


# --- Self stands in for the participant of an untagged memory ---------------------------


def test_revoking_self_hides_untagged_memories_on_the_next_query(alice):
    own = Person.objects.get(owner=alice, is_self=True)
    untagged = memory_create(owner=alice, body="I finished the quilt")
    bob = person(alice, "Bob")
    with_bob = memory_create(
        owner=alice, body="Bob and the quilt", participants=[ParticipantSpec(person=bob)]
    )
    assert set(agent_visible_memories(alice)) == {untagged, with_bob}
    assert blocked(untagged) == 0

    person_set_consent(person=own, status=ConsentStatus.REVOKED, actor=alice)
    assert set(agent_visible_memories(alice)) == {with_bob}
    assert blocked(untagged) == 1
    assert blocked(with_bob) == 0

    person_set_consent(person=own, status=ConsentStatus.GRANTED, actor=alice)
    assert set(agent_visible_memories(alice)) == {untagged, with_bob}
    assert blocked(untagged) == 0


def test_an_owner_without_a_self_person_fails_closed_for_untagged_memories(db):
    owner = UserFactory(with_self=False)
    untagged = memory_create(owner=owner, body="nobody here")
    assert not agent_visible_memories(owner).filter(pk=untagged.pk).exists()
    assert blocked(untagged) == 1


def test_adding_a_person_to_an_untagged_memory_replaces_self_in_the_count(alice):
    own = Person.objects.get(owner=alice, is_self=True)
    person_set_consent(person=own, status=ConsentStatus.PENDING, actor=alice)
    memory = memory_create(owner=alice, body="a walk")
    assert blocked(memory) == 1
    MemoryParticipant.objects.create(memory=memory, person=person(alice, "Ann"))
    assert blocked(memory) == 0
    assert agent_visible_memories(alice).filter(pk=memory.pk).exists()
