"""The circles' maintained hint (MemoryShare.blocked_count and copies) and why it cannot leak.

The expected counts are recomputed here from the rows, independently of the
triggers of circles migrations 0002 and 0006.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from circles.models import CircleMembership, MemoryShare
from circles.services import circle_create
from memories.gate import circle_visible_memories
from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryParticipant
from memories.retrieval import circle_memory_search, circle_memory_timeline
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person, PersonConsent
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db


def expected_counts() -> dict:
    granted = {
        (person_id, audience)
        for person_id, audience in PersonConsent.objects.filter(status=ConsentStatus.GRANTED).values_list(
            "person_id", "audience"
        )
    }
    selves = set(Person.objects.filter(is_self=True).values_list("pk", flat=True))

    def ok(person_id, circle_id) -> bool:
        return person_id in selves or (person_id, f"circle:{circle_id}") in granted

    counts = {}
    for share in MemoryShare.objects.select_related("memory"):
        count = sum(
            not ok(person_id, share.circle_id)
            for person_id in MemoryParticipant.objects.filter(memory_id=share.memory_id).values_list(
                "person_id", flat=True
            )
        )
        source = share.memory.source_person_id
        count += source is not None and not ok(source, share.circle_id)
        counts[share.pk] = count
    return counts


def assert_hint_exact() -> None:
    assert dict(MemoryShare.objects.values_list("pk", "blocked_count")) == expected_counts()
    for share in MemoryShare.objects.select_related("memory"):
        assert share.owner_id == share.memory.owner_id
        assert share.occurred_at == share.memory.occurred_at
        assert (share.embedding is None) == (share.memory.embedding is None)
        # The text vector the full-text side of circle search reads (migration 0006).
        assert share.search_vector == share.memory.search_vector


def unit(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(EMBEDDING_DIMENSIONS)
    return list(vector / np.linalg.norm(vector))


STATUSES = [ConsentStatus.GRANTED, ConsentStatus.PENDING, ConsentStatus.REVOKED]
operation = st.one_of(
    st.tuples(
        st.just("create"), st.lists(st.integers(0, 3), max_size=2, unique=True), st.none() | st.integers(0, 3)
    ),
    st.tuples(st.just("consent"), st.integers(0, 3), st.sampled_from(STATUSES), st.integers(0, 1)),
    st.tuples(st.just("share"), st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("unshare"), st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("add"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("remove"), st.integers(0, 5), st.integers(0, 3)),
    st.tuples(st.just("source"), st.integers(0, 5), st.none() | st.integers(0, 3)),
    st.tuples(st.just("embed"), st.integers(0, 5), st.none() | st.integers(0, 3)),
    st.tuples(st.just("redate"), st.integers(0, 5), st.integers(1, 900)),
    st.tuples(st.just("retext"), st.integers(0, 5), st.sampled_from(["a lantern walk", "rain", "a day"])),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=st.lists(operation, max_size=14))
def test_share_counts_and_copies_stay_exact_under_any_sequence_of_changes(alice, operations):
    from datetime import timedelta

    from django.utils import timezone

    with transaction.atomic():
        circles = [circle_create(owner=alice, name="One"), circle_create(owner=alice, name="Two")]
        people = [person_create(owner=alice, display_name=f"P{n}") for n in range(3)]
        people.append(Person.objects.get(owner=alice, is_self=True))
        memories: list[Memory] = []
        for name, *args in operations:
            if name == "create":
                first, second = args
                memories.append(
                    memory_create(
                        owner=alice,
                        body="a day",
                        source_person=None if second is None else people[second],
                        participants=[ParticipantSpec(person=people[n]) for n in first],
                    )
                )
            elif name == "consent":
                index, status, circle = args
                if not people[index].is_self:
                    person_set_consent(
                        person=people[index], status=status, actor=alice, audience=circles[circle].audience
                    )
            elif not memories:
                continue
            else:
                memory = memories[args[0] % len(memories)]
                if name == "share":
                    MemoryShare.objects.get_or_create(memory=memory, circle=circles[args[1]], shared_by=alice)
                elif name == "unshare":
                    MemoryShare.objects.filter(memory=memory, circle=circles[args[1]]).delete()
                elif name == "add":
                    MemoryParticipant.objects.get_or_create(memory=memory, person=people[args[1]])
                elif name == "remove":
                    MemoryParticipant.objects.filter(memory=memory, person=people[args[1]]).delete()
                elif name == "source":
                    Memory.objects.filter(pk=memory.pk).update(
                        source_person=None if args[1] is None else people[args[1]]
                    )
                elif name == "embed":
                    Memory.objects.filter(pk=memory.pk).update(
                        embedding=None if args[1] is None else unit(args[1])
                    )
                elif name == "retext":
                    Memory.objects.filter(pk=memory.pk).update(body=args[1])
                elif name == "redate":
                    Memory.objects.filter(pk=memory.pk).update(
                        occurred_at=timezone.now() - timedelta(days=args[1])
                    )
            assert_hint_exact()
        transaction.set_rollback(True)


# --- the count is a hint: wrong either way, never a leak ------------------------------------


def _force(share: MemoryShare, value: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE circles_memoryshare SET blocked_count = %s WHERE id = %s", [value, share.pk])


def test_a_count_too_low_does_not_show_a_blocked_memory(alice, bob, family):
    carol = person_create(owner=alice, display_name="Carol")
    memory = memory_create(
        owner=alice, body="lantern walk", sensitivity="public", participants=[ParticipantSpec(person=carol)]
    )
    Memory.objects.filter(pk=memory.pk).update(embedding=unit(1))
    share = MemoryShare.objects.create(memory=memory, circle=family, shared_by=alice)  # carol: pending
    share.refresh_from_db()
    assert share.blocked_count == 1
    _force(share, 0)
    assert not circle_visible_memories(family.pk, [bob.pk]).exists()
    assert list(circle_memory_timeline(family.pk, [bob.pk])) == []
    assert circle_memory_search(family.pk, [bob.pk], "lantern", query_embedding=unit(1)) == []


def test_a_count_too_high_only_makes_the_result_smaller(alice, bob, family):
    memory = memory_create(owner=alice, body="lantern walk", sensitivity="public")
    share = MemoryShare.objects.create(memory=memory, circle=family, shared_by=alice)
    assert [m.pk for m in circle_memory_timeline(family.pk, [bob.pk])] == [memory.pk]
    _force(share, 3)
    assert list(circle_memory_timeline(family.pk, [bob.pk])) == []
    # The owner still sees their own, whatever the count says.
    assert [m.pk for m in circle_memory_timeline(family.pk, [alice.pk])] == [memory.pk]


def test_the_timeline_walks_shares_newest_first(alice, bob, family):
    from datetime import timedelta

    from django.utils import timezone

    now = timezone.now()
    made = []
    for days in (5, 1, 3):
        memory = memory_create(owner=alice, body=f"{days} days ago", sensitivity="public")
        Memory.objects.filter(pk=memory.pk).update(occurred_at=now - timedelta(days=days))
        MemoryShare.objects.create(memory=memory, circle=family, shared_by=alice)
        made.append((days, memory.pk))
    assert [m.pk for m in circle_memory_timeline(family.pk, [bob.pk])] == [pk for _, pk in sorted(made)]
    assert CircleMembership.objects.filter(circle=family, user=bob).exists()


@pytest.mark.parametrize("for_agent", [False, True])
@pytest.mark.parametrize("several", [False, True])
def test_compiled_circle_gate_is_what_the_orm_compiles(alice, bob, family, mallory, for_agent, several):
    # The circle's gate is compiled once per shape with placeholders; for every circle
    # and set of viewers it must be exactly the statement the ORM compiles.
    from memories import gate

    other = circle_create(owner=mallory, name="Other", description="")
    shape = {"for_agent": for_agent, "read_by_several": several}
    cases = ((family, [bob.pk]), (family, [bob.pk, alice.pk]), (other, [mallory.pk]), (family, [alice.pk]))
    for circle, viewers in cases:
        fresh = circle_visible_memories(circle.pk, viewers, **shape)
        sql, params = fresh.order_by().values_list("pk", "embedding").query.sql_with_params()
        compiled = gate._compiled_circle_scope(circle.pk, viewers, **shape)
        assert compiled == (sql, list(params))
        assert not any(gate._mentions_placeholder(param) for param in compiled[1])


def test_circle_text_search_reads_only_shares_that_can_pass_and_doctor_repairs_the_copy(alice, bob, family):
    # The full-text side reads the shares' own text copies (migration 0006): a share
    # whose copy went stale behind the triggers' back is not found by its words, the
    # doctor names it, and its fix brings it back. Never shown past the gate either way.
    from io import StringIO

    from django.core.management import CommandError, call_command

    memory = memory_create(owner=alice, body="lantern walk by the river", sensitivity="public")
    share = MemoryShare.objects.create(memory=memory, circle=family, shared_by=alice)
    assert [hit.memory.pk for hit in circle_memory_search(family.pk, [bob.pk], "lantern")] == [memory.pk]
    # An edit of the memory's text reaches the share's copy.
    Memory.objects.filter(pk=memory.pk).update(body="kite festival on the hill")
    assert circle_memory_search(family.pk, [bob.pk], "lantern") == []
    assert [hit.memory.pk for hit in circle_memory_search(family.pk, [bob.pk], "kite")] == [memory.pk]

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE circles_memoryshare SET search_vector = to_tsvector('english', 'waffles') WHERE id = %s",
            [share.pk],
        )
    assert circle_memory_search(family.pk, [bob.pk], "kite") == []
    out = StringIO()
    with pytest.raises(CommandError):  # doctor exits non-zero while a problem is found
        call_command("doctor", stdout=out, stderr=StringIO())
    assert (
        "✗ 1 shared memories whose circle consent count or copy of the memory is out of date"
        in out.getvalue()
    )
    call_command("doctor", "--fix", stdout=StringIO(), stderr=StringIO())
    share.refresh_from_db()
    assert share.search_vector == Memory.objects.get(pk=memory.pk).search_vector
    assert [hit.memory.pk for hit in circle_memory_search(family.pk, [bob.pk], "kite")] == [memory.pk]


def test_circle_text_search_finds_the_owners_own_blocked_shares_and_nobody_elses(alice, bob, family):
    carol = person_create(owner=alice, display_name="Carol")  # pending for Family
    memory = memory_create(
        owner=alice, body="lantern walk", sensitivity="public", participants=[ParticipantSpec(person=carol)]
    )
    MemoryShare.objects.create(memory=memory, circle=family, shared_by=alice)
    assert MemoryShare.objects.get(memory=memory).blocked_count == 1
    assert [hit.memory.pk for hit in circle_memory_search(family.pk, [alice.pk], "lantern")] == [memory.pk]
    assert circle_memory_search(family.pk, [bob.pk], "lantern") == []
    assert circle_memory_search(family.pk, [alice.pk, bob.pk], "lantern") == []


def test_the_owners_own_blocked_shares_are_ranked_exactly_beside_the_index(alice, bob, family, monkeypatch):
    # Past CIRCLE_EXACT_CANDIDATES_MAX circle search walks the open shares' index and ranks
    # the viewers' own blocked shares (the owner always sees their own) exactly beside it,
    # in SQL: the nearest few by the shares' copies through the gate, all of them when the
    # gate leaves too few. Bob, a member, sees none of them; Alice sees them nearest first.
    from memories import gate
    from memories.search import circles
    from memories.search import settings as search_settings

    monkeypatch.setattr(search_settings, "CIRCLE_EXACT_CANDIDATES_MAX", 0)
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_OVERFETCH", 1)
    carol = person_create(owner=alice, display_name="Carol")  # pending for Family
    made = []
    for seed in (1, 2, 3):
        memory = memory_create(
            owner=alice,
            body=f"walk {seed}",
            sensitivity="public",
            participants=[ParticipantSpec(person=carol)],
        )
        Memory.objects.filter(pk=memory.pk).update(embedding=unit(seed))
        MemoryShare.objects.create(memory=memory, circle=family, shared_by=alice)
        made.append(memory.pk)
    open_one = memory_create(owner=alice, body="open walk", sensitivity="public")
    Memory.objects.filter(pk=open_one.pk).update(embedding=unit(9))
    MemoryShare.objects.create(memory=open_one, circle=family, shared_by=alice)
    query = unit(2)

    def nearest(viewers, limit):
        with transaction.atomic():
            return [
                memory_id
                for memory_id, _ in circles._circle_neighbours(
                    lambda: circle_visible_memories(family.pk, viewers),
                    query,
                    visible=gate._compiled_circle_scope(
                        family.pk, viewers, for_agent=False, read_by_several=False
                    ),
                    circle_id=family.pk,
                    viewers=viewers,
                    limit=limit,
                )
            ]

    alices = nearest([alice.pk], 4)
    assert alices[0] == made[1] and set(alices) == {*made, open_one.pk}
    assert nearest([bob.pk], 4) == [open_one.pk]
    # Read by both at once: only what both may see (the blocked ones are Alice's alone).
    assert nearest([alice.pk, bob.pk], 4) == [open_one.pk]
    # One asked: the nearest blocked one is refused, so all of them are ranked (the fallback).
    assert nearest([alice.pk, bob.pk], 1) == [open_one.pk]
    assert nearest([alice.pk], 1) == [made[1]]


def test_an_exact_circle_search_finds_open_and_own_blocked_shares(alice, bob, family):
    # Under CIRCLE_EXACT_CANDIDATES_MAX the circle's open shares and the viewers' own blocked
    # ones are ranked exactly (two branches of one statement, each on its own index).
    from memories import gate
    from memories.search import circles

    carol = person_create(owner=alice, display_name="Carol")  # pending for Family
    blocked = memory_create(
        owner=alice, body="walk", sensitivity="public", participants=[ParticipantSpec(person=carol)]
    )
    open_ones = [
        memory_create(owner=alice, body=f"open walk {seed}", sensitivity="public") for seed in (1, 2)
    ]
    for seed, made in zip((5, 1, 2), (blocked, *open_ones), strict=True):
        Memory.objects.filter(pk=made.pk).update(embedding=unit(seed))
        MemoryShare.objects.create(memory=made, circle=family, shared_by=alice)

    def nearest(viewers):
        with transaction.atomic():
            return [
                memory_id
                for memory_id, _ in circles._circle_neighbours(
                    lambda: circle_visible_memories(family.pk, viewers),
                    unit(5),
                    visible=gate._compiled_circle_scope(
                        family.pk, viewers, for_agent=False, read_by_several=False
                    ),
                    circle_id=family.pk,
                    viewers=viewers,
                    limit=3,
                )
            ]

    assert nearest([alice.pk])[0] == blocked.pk  # her own, nearest
    assert set(nearest([alice.pk])) == {blocked.pk, *(made.pk for made in open_ones)}
    assert set(nearest([bob.pk])) == {made.pk for made in open_ones}
    assert set(nearest([alice.pk, bob.pk])) == {made.pk for made in open_ones}


@pytest.mark.django_db(transaction=True)
def test_an_exact_circle_search_reads_the_open_shares_vectors_from_the_index_alone(alice, bob, family):
    # The circle's open shares with their vectors side by side in memory_share_open_vectors, not
    # every share of the circle read from the table (with the viewers' own blocked ones OR-ed
    # into one condition, 20,000 shares were read for 2,000 open: ~8 ms).
    import re

    from memories.search import circles, knn
    from tests.index_scans import planned_as_on_a_big_table

    # Family's shares among nine times as many of another circle's, as in a shared table:
    # reading the table for each of them costs a page apiece, their index entries lie side by side.
    work = circle_create(owner=alice, name="Work", description="")
    carol = person_create(owner=alice, display_name="Carol")  # pending for Family
    made = Memory.objects.bulk_create(
        Memory(
            owner=alice, body=f"evening {n}", sensitivity="public", embedding=unit(n), embedding_model="test"
        )
        for n in range(1000)
    )
    MemoryParticipant.objects.bulk_create(
        MemoryParticipant(memory=memory, person=carol) for n, memory in enumerate(made) if n % 30 == 10
    )
    MemoryShare.objects.bulk_create(
        MemoryShare(memory=memory, circle=family if n % 10 == 0 else work, shared_by=alice)
        for n, memory in enumerate(made)
    )
    assert MemoryShare.objects.filter(circle=family, blocked_count=0).count() == 67
    sql, params = circles._nearest_shares_sql(
        circles._circle_open_share_branches(family.pk, [bob.pk]), knn._vector_text(unit(7)), 8
    )
    scans, plan = planned_as_on_a_big_table(f"SELECT {sql}", params, vacuum="circles_memoryshare")
    assert ("Index Only Scan", "memory_share_open_vectors") in scans, scans
    # Of the 67 entries read, the table was asked about at most a few (pages an earlier test's
    # rolled-back rows left not yet all-visible).
    fetches = [int(count) for count in re.findall(r'"Heap Fetches": (\d+)', plan)]
    assert fetches and max(fetches) <= 5, fetches
