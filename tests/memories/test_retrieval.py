"""The consent gate and hybrid search, case by case (a port of the privacy checklist).

Alice owns the journal, Bob/Carol/Dan are people in it, Mallory is another user.
Vectors are built in a plane so the distance order is obvious: `toward(angle)`
sits at cosine distance 1 - cos(angle) from the query `toward(0)`.
"""

from __future__ import annotations

import importlib
import math
import random
import re
from datetime import date, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone
from pgvector import Vector

from memories import gate, retrieval
from memories.models import EMBEDDING_DIMENSIONS, EdgeKind, Memory, MemoryEdge, MemoryParticipant
from memories.retrieval import (
    agent_visible_memories,
    memory_related,
    memory_search,
    memory_similar,
)
from memories.search import fusion, hints, knn, knn_open, statements
from memories.search import settings as search_settings
from memories.selectors import MemoryFilters
from people.models import ConsentStatus, Person
from people.services import person_set_consent

pytestmark = pytest.mark.django_db

BACKWARD = importlib.import_module("memories.migrations.0010_embedding_stored_inline").BACKWARD

QUERY = "lantern"


def toward(angle: float) -> list[float]:
    vector = [0.0] * EMBEDDING_DIMENSIONS
    vector[0], vector[1] = math.cos(angle), math.sin(angle)
    return vector


def person(owner, name: str, status: str = ConsentStatus.GRANTED) -> Person:
    return Person.objects.create(owner=owner, display_name=name, consent_status=status)


def memory(owner, body: str = "an evening with a lantern", *, angle: float | None = 0.1, people=(), **fields):
    created = Memory.objects.create(
        owner=owner,
        body=body,
        embedding=None if angle is None else toward(angle),
        embedding_model="" if angle is None else "test-plane",
        **fields,
    )
    for someone in people:
        MemoryParticipant.objects.create(memory=created, person=someone, role="present")
    return created


def agent_ids(owner, query: str = QUERY, **options) -> list:
    options.setdefault("query_embedding", toward(0))
    return [hit.memory.pk for hit in memory_search(owner, query, respect_consent=True, **options)]


def owner_ids(owner, query: str = QUERY, **options) -> list:
    options.setdefault("query_embedding", toward(0))
    return [hit.memory.pk for hit in memory_search(owner, query, respect_consent=False, **options)]


@pytest.fixture(params=["candidates", "exact", "index"])
def strategy(request, monkeypatch):
    """Run a test through every vector path: exact search over the memories the
    maintained gate count calls open, exact search over the owner's memories, and
    the HNSW iterative scan. The gate in SQL filters all three."""
    if request.param != "candidates":
        monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    if request.param == "index":
        monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
        monkeypatch.setattr(search_settings, "EXACT_FALLBACK_MAX_MEMORIES", 0)
        # Dead index entries of earlier tests must not end the scan (tests/index_scans.py).
        request.getfixturevalue("unbounded_index_scans")
    return request.param


# --- the checklist ---------------------------------------------------------------------


def test_pending_participant_hides_memory_from_agents_but_not_from_owner(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    secret = memory(alice, people=[bob])

    assert secret.pk not in agent_ids(alice)
    assert secret.pk in owner_ids(alice)


def test_revoked_participant_hides_memory_from_agents(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.REVOKED)
    secret = memory(alice, people=[bob])

    assert agent_ids(alice) == []
    assert owner_ids(alice) == [secret.pk]


def test_granted_participant_memory_is_shown_to_agents(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.GRANTED)
    shared = memory(alice, people=[bob])

    assert agent_ids(alice) == [shared.pk]


def test_revoking_consent_takes_effect_on_the_next_query(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.GRANTED)
    shared = memory(alice, people=[bob])
    assert agent_ids(alice) == [shared.pk]

    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)

    assert agent_ids(alice) == []
    assert memory_similar(memory(alice, angle=0.2), respect_consent=True) == []


def test_one_ungranted_of_three_participants_hides_the_memory_entirely(alice, strategy):
    bob, carol = person(alice, "Bob"), person(alice, "Carol")
    dan = person(alice, "Dan", ConsentStatus.PENDING)
    mixed = memory(alice, people=[bob, carol, dan])
    everyone_agreed = memory(alice, angle=0.3, people=[bob, carol])

    assert agent_ids(alice) == [everyone_agreed.pk]
    assert set(owner_ids(alice)) == {mixed.pk, everyone_agreed.pk}


def test_self_observed_memory_without_participants_is_visible_to_agents(alice, strategy):
    alone = memory(alice, "I watched the lantern festival alone")

    assert agent_ids(alice) == [alone.pk]


def test_source_person_without_consent_hides_memory_told_by_them(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    told = memory(alice, "Bob told me about the lantern", source_person=bob)

    assert agent_ids(alice) == []
    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)
    assert agent_ids(alice) == [told.pk]


# --- similar lists and edges never include or reveal ungated memories ---------------------


def test_agent_similar_list_skips_ungated_memories(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    anchor = memory(alice, angle=0.0)
    hidden = memory(alice, angle=0.05, people=[bob])
    visible = memory(alice, angle=0.5)

    agent_similar = [hit.memory.pk for hit in memory_similar(anchor, respect_consent=True)]
    owner_similar = [hit.memory.pk for hit in memory_similar(anchor, respect_consent=False)]

    assert agent_similar == [visible.pk]
    assert owner_similar == [hidden.pk, visible.pk]
    scores = [hit.score for hit in memory_similar(anchor, respect_consent=True)]
    hidden.delete()
    # Identical with the hidden memory gone: nothing about it leaked into the answer.
    assert [hit.score for hit in memory_similar(anchor, respect_consent=True)] == scores


def test_agent_gets_nothing_similar_or_related_for_an_ungated_memory(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    hidden = memory(alice, angle=0.0, people=[bob])
    memory(alice, angle=0.1)

    assert memory_similar(hidden, respect_consent=True) == []
    assert memory_related(hidden, respect_consent=True) == []
    assert memory_similar(hidden, respect_consent=False) != []


def test_agent_related_never_includes_or_hints_at_ungated_memories(alice, strategy):
    carol = person(alice, "Carol", ConsentStatus.GRANTED)
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    anchor = memory(alice, angle=0.0, people=[carol])
    hidden = memory(alice, angle=0.05, people=[carol, bob])
    near = memory(alice, angle=0.2)
    with_carol = memory(alice, angle=1.5, people=[carol])
    # The workers' stored edges include the hidden memory (they see everything).
    for target, kind, weight in [
        (hidden, EdgeKind.SIMILAR, 0.99),
        (hidden, EdgeKind.SHARED_PERSON, 1.0),
        (near, EdgeKind.SIMILAR, 0.98),
    ]:
        MemoryEdge.objects.create(owner=alice, source=anchor, target=target, kind=kind, weight=weight)

    agent = {(hit.memory.pk, hit.kind) for hit in memory_related(anchor, respect_consent=True)}
    owner = {(hit.memory.pk, hit.kind) for hit in memory_related(anchor, respect_consent=False)}

    assert agent == {(near.pk, EdgeKind.SIMILAR), (with_carol.pk, EdgeKind.SHARED_PERSON)}
    assert (hidden.pk, EdgeKind.SIMILAR) in owner and (hidden.pk, EdgeKind.SHARED_PERSON) in owner
    before = [(hit.memory.pk, hit.kind, hit.weight) for hit in memory_related(anchor, respect_consent=True)]
    hidden.delete()
    after = [(hit.memory.pk, hit.kind, hit.weight) for hit in memory_related(anchor, respect_consent=True)]
    assert after == before


def test_limit_k_returns_k_even_when_most_nearer_neighbours_are_gated(alice, strategy):
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    for index in range(60):
        memory(alice, f"near {index}", angle=0.001 * (index + 1), people=[bob])
    far = [memory(alice, f"far {index}", angle=0.5 + 0.01 * index) for index in range(8)]

    found = agent_ids(alice, "zebra", limit=5)  # no text match: the vector side alone decides

    assert found == [item.pk for item in far[:5]]


def test_expired_and_superseded_memories_leave_agents_but_stay_for_the_owner(alice, strategy):
    now = timezone.now()
    expired = memory(alice, angle=0.1, expires_at=now - timedelta(minutes=1))
    newer = memory(alice, angle=0.2)
    older = memory(alice, angle=0.3, superseded_by=newer)
    living = memory(alice, angle=0.4, expires_at=now + timedelta(days=1))

    assert agent_ids(alice) == [newer.pk, living.pk]
    assert set(owner_ids(alice)) == {expired.pk, newer.pk, older.pk, living.pk}


def test_searches_are_scoped_to_their_owner(alice, mallory, strategy):
    alices = memory(alice, "lantern by the river")
    mallorys = memory(mallory, "lantern by the sea")

    for respect_consent in (True, False):
        hits = memory_search(mallory, QUERY, respect_consent=respect_consent, query_embedding=toward(0))
        assert [hit.memory.pk for hit in hits] == [mallorys.pk]
        similar = memory_similar(mallorys, respect_consent=respect_consent)
        assert alices.pk not in [hit.memory.pk for hit in similar]
    assert not agent_visible_memories(mallory).filter(pk=alices.pk).exists()


# --- search mechanics ------------------------------------------------------------------


def test_full_text_finds_memories_that_have_no_embedding_yet(alice):
    waiting = memory(alice, "We hung a paper lantern in the orchard", angle=None)

    assert agent_ids(alice, "lanterns orchard") == [waiting.pk]
    assert owner_ids(alice, "lantern", query_embedding=None) == [waiting.pk]


def test_search_without_a_working_model_falls_back_to_full_text(alice, monkeypatch):
    from memories import embeddings

    def broken(text: str) -> list[float]:
        raise OSError("model files missing")

    monkeypatch.setattr(embeddings, "embed_text", broken)
    found = memory(alice, "the orchard in spring", angle=0.1)
    memory(alice, "something else entirely", angle=0.0)

    assert [hit.memory.pk for hit in memory_search(alice, "orchard")] == [found.pk]


def test_search_embeds_the_query_with_the_model_when_none_is_given(alice):
    from memories.embeddings import embed_text

    dog = Memory.objects.create(owner=alice, body="Our dog chased the ball across the beach")
    tax = Memory.objects.create(owner=alice, body="Filed the quarterly tax return paperwork")
    for item in (dog, tax):
        item.embedding = embed_text(item.body)
        item.save(update_fields=["embedding"])

    hits = memory_search(alice, "puppy playing fetch", respect_consent=True)

    assert [hit.memory.pk for hit in hits][:1] == [dog.pk]
    assert hits[0].similarity is not None and hits[0].text_rank is None


def test_hybrid_search_ranks_a_memory_matching_both_text_and_meaning_first(alice):
    both = memory(alice, "a lantern walk, lantern in hand", angle=0.3)
    meaning_only = memory(alice, "an evening stroll", angle=0.1)
    text_only = memory(alice, "lantern repair", angle=1.4)

    hits = memory_search(alice, "lantern", query_embedding=toward(0))

    assert hits[0].memory.pk == both.pk
    assert {hit.memory.pk for hit in hits} == {both.pk, meaning_only.pk, text_only.pk}
    assert hits[0].similarity is not None and hits[0].text_rank is not None


def test_filters_by_person_kind_and_date_range(alice, strategy):
    bob = person(alice, "Bob")
    carol = person(alice, "Carol", ConsentStatus.PENDING)
    old_day = timezone.now() - timedelta(days=400)
    with_bob = memory(alice, people=[bob], kind="event", occurred_at=old_day)
    with_carol = memory(alice, angle=0.2, people=[carol], kind="event")
    plain = memory(alice, angle=0.3, kind="preference")

    assert owner_ids(alice, filters=MemoryFilters(person=bob)) == [with_bob.pk]
    assert owner_ids(alice, filters=MemoryFilters(person=carol)) == [with_carol.pk]
    # Asking for a person who has not consented finds nothing for an agent.
    assert agent_ids(alice, filters=MemoryFilters(person=carol)) == []
    assert owner_ids(alice, filters=MemoryFilters(kind="preference")) == [plain.pk]
    recent = MemoryFilters(date_from=date.today() - timedelta(days=30), date_to=date.today())
    assert set(owner_ids(alice, filters=recent)) == {with_carol.pk, plain.pk}
    assert agent_ids(alice, filters=recent) == [plain.pk]


def test_hits_come_with_participants_prefetched(alice, django_assert_num_queries):
    bob = person(alice, "Bob")
    memory(alice, people=[bob])
    hits = memory_search(alice, QUERY, query_embedding=toward(0))

    with django_assert_num_queries(0):
        assert [p.person.display_name for p in hits[0].memory.participants.all()] == ["Bob"]


def test_empty_query_returns_nothing_and_bad_arguments_are_refused(alice):
    memory(alice)

    assert memory_search(alice, "   ", query_embedding=toward(0)) == []
    with pytest.raises(ValidationError):
        memory_search(alice, QUERY, limit=0, query_embedding=toward(0))
    with pytest.raises(ValidationError):
        memory_search(alice, QUERY, limit=1000, query_embedding=toward(0))
    with pytest.raises(ValidationError):
        memory_search(alice, QUERY, query_embedding=[1.0, 0.0])


def test_the_query_vector_literal_names_exactly_the_vector_pgvector_would(alice):
    # Nine significant digits per number: every float32 comes back exactly, so the
    # faster literal is the same vector as pgvector's own formatting, in full and
    # in half precision, whatever the magnitudes.
    rng = random.Random(7)
    samples = [
        [rng.gauss(0, 0.05) for _ in range(EMBEDDING_DIMENSIONS)],
        [rng.uniform(-1, 1) * 10.0 ** rng.randint(-12, 3) for _ in range(EMBEDDING_DIMENSIONS)],
        [1 / 3, 2 / 3, 1e-30, -7.0000001, 12345.678, *([0.0] * (EMBEDDING_DIMENSIONS - 5))],
    ]
    with connection.cursor() as cursor:
        for values in samples:
            literal = knn._vector_text(values)
            assert re.fullmatch(r"\[[-+0-9.e,]+\]", literal)
            cursor.execute(
                "SELECT %s::vector = %s::vector, %s::halfvec = %s::halfvec",
                [literal, Vector(values).to_text(), literal, Vector(values).to_text()],
            )
            assert cursor.fetchone() == (True, True)


def test_gate_is_a_not_exists_inside_the_sql(alice):
    sql = str(agent_visible_memories(alice).query).upper()

    assert "NOT EXISTS" in sql and "CONSENT_STATUS" in sql


# --- the agents' exact path over open memories: candidates, then the fallback --------


def test_exact_path_over_open_memories_falls_back_when_filters_drop_the_nearest(alice, monkeypatch):
    # The exact path ranks the owner's open memories by their half-precision copies
    # and only passes the nearest few (limit x EXACT_CANDIDATES_OVERFETCH) through
    # the gate and filters. Here all of those are events, and the search asks for
    # knowledge: the answer must come from the exact search over every open memory.
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_OVERFETCH", 1)
    for n in range(25):
        memory(alice, f"an evening {n}", angle=0.01 * n, kind="event")
    wanted = [memory(alice, "a recipe", angle=angle, kind="knowledge") for angle in (1.0, 1.2)]
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    memory(alice, "a recipe", angle=1.4, kind="knowledge", people=[bob])

    hits = memory_search(
        alice,
        "soup",  # in no body: only the vector side can find anything
        respect_consent=True,
        limit=2,
        filters=MemoryFilters(kind="knowledge"),
        query_embedding=toward(0),
    )

    assert [hit.memory.pk for hit in hits] == [m.pk for m in wanted]
    assert all(hit.similarity is not None for hit in hits)


def test_agents_index_path_ranks_at_full_precision(alice, monkeypatch, unbounded_index_scans):
    # Memories whose half-precision copies are identical but whose full vectors
    # differ: the index path orders by the copy, then re-ranks by the full vector.
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    angles = (0.30004, 0.30002, 0.30003, 0.30001)
    created = {angle: memory(alice, "a lantern", angle=angle) for angle in angles}
    anchor = memory(alice, "the query", angle=0.0)

    ids = [hit.memory.pk for hit in memory_similar(anchor, respect_consent=True)]

    assert ids == [created[angle].pk for angle in sorted(created)]


def _agents_index_widths(owner) -> list[int]:
    """The hnsw.ef_search values an agent's search set (captured from its statements): none when it
    searched exactly."""
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        hits = memory_search(owner, "zzzz", respect_consent=True, query_embedding=toward(0.0), limit=2)
    assert hits, "the search found nothing"
    return [
        int(query["sql"].split("'hnsw.ef_search', '")[1].split("'")[0])
        for query in queries.captured_queries
        if "'hnsw.ef_search'" in query["sql"]
    ]


def test_a_mostly_gated_journal_is_searched_exactly_a_small_open_one_through_the_index(
    alice, monkeypatch, unbounded_index_scans
):
    # When most of the journal is gated, the nearest open memories are near-ties far
    # from the query, which only a near-exhaustive index scan finds: exact search over
    # the open ones costs less (memory_gate_open_vectors). An owner who simply has few
    # memories, most of them open, is searched through the index as a big one is
    # (the size test is a kept hint).
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    bob = person(alice, "Bob", ConsentStatus.PENDING)
    open_ones = [memory(alice, f"an open evening {n}", angle=0.01 * n) for n in range(4)]
    memory(alice, "a gated evening", angle=0.005, people=[bob])
    narrow = _agents_index_widths(alice)
    assert len(narrow) == 1  # one scan of the agents' index

    for n in range(16):  # now 4 open of 21: over 80% gated
        memory(alice, f"a gated evening {n}", angle=0.001 * n, people=[bob])
    assert _agents_index_widths(alice) == narrow  # the size test is kept a while
    retrieval.forget_hints()
    assert _agents_index_widths(alice) == []  # exact: no index scan
    hits = memory_search(alice, "zzzz", respect_consent=True, query_embedding=toward(0.0), limit=3)
    assert [hit.memory.pk for hit in hits] == [m.pk for m in open_ones[:3]]


@pytest.mark.django_db(transaction=True)
def test_exact_search_over_open_memories_reads_their_copies_from_the_index_alone(alice, mallory):
    # The exact paths rank an owner's open rows by an index-only scan of
    # memory_gate_open_vectors (the owner's entries side by side), not one table page
    # per row: in a shared table an owner's rows lie spread among everyone's.
    from tests.index_scans import planned_as_on_a_big_table

    # Alice's rows among nine times as many of someone else's, as in a shared table: reading
    # the table for each of hers costs a page apiece, her index entries lie side by side.
    Memory.objects.bulk_create(
        Memory(
            owner=alice if n % 10 == 0 else mallory,
            body=f"an evening {n}",
            embedding=toward(0.0001 * n),
            embedding_model="test-plane",
        )
        for n in range(3000)
    )
    scans, plan = planned_as_on_a_big_table(
        "SELECT memory_id FROM memories_memorygate "
        "WHERE owner_id = %s AND blocked_count = 0 AND embedding IS NOT NULL "
        "ORDER BY (embedding <=> %s::halfvec) + 0, memory_id LIMIT 8",
        [alice.pk, knn._vector_text(toward(0.0))],
        vacuum="memories_memorygate",
    )
    assert ("Index Only Scan", "memory_gate_open_vectors") in scans, scans
    assert '"Heap Fetches": 0' in plan


@pytest.mark.parametrize("path", ["candidates", "exact"])
def test_exact_paths_stay_exact_whatever_plan_the_database_prefers(alice, mallory, monkeypatch, path):
    # The exact paths must order by an expression no vector index can serve: if the
    # planner could hand "ORDER BY distance LIMIT k" to an HNSW index, it would get
    # that index's nearest few over ALL owners (ef_search, no iterative scan) and
    # filter them to this owner's candidates, often leaving nothing. Statistics
    # decide whether it prefers the index; here the index is made irresistible.
    if path == "exact":
        monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    for index in range(50):
        memory(mallory, f"near {index}", angle=0.0001 * index)
    mine = [memory(alice, f"mine {index}", angle=0.6 + 0.01 * index) for index in range(3)]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("SET LOCAL hnsw.ef_search = 10")

    assert agent_ids(alice, "zebra", limit=3) == [item.pk for item in mine]
    assert owner_ids(alice, "zebra", limit=3) == [item.pk for item in mine]


@pytest.mark.parametrize("respect_consent", [True, False])
def test_compiled_scope_is_the_gate_the_orm_compiles_for_this_owner(alice, mallory, respect_consent):
    # The cached SQL (compiled once with a placeholder owner) must be exactly what the
    # ORM compiles for each owner: same statement, same parameters.
    for owner in (alice, mallory, alice):
        fresh = retrieval.memory_scope(owner, respect_consent=respect_consent)
        sql, params = fresh.order_by().values_list("pk", "embedding").query.sql_with_params()
        assert gate._compiled_scope(owner, respect_consent=respect_consent) == (sql, list(params))
        assert owner.pk in params
    _, params = gate._compiled_scope(alice, respect_consent=respect_consent)
    assert gate._OWNER_PLACEHOLDER not in params


def test_compiled_scope_lets_through_what_the_gate_does(alice, mallory):
    granted, pending = person(alice, "Grace"), person(alice, "Pat", ConsentStatus.PENDING)
    open_memory = memory(alice, people=[granted])
    gated_memory = memory(alice, people=[pending])
    mallorys = memory(mallory)

    def passing(owner, respect_consent):
        sql, params = gate._compiled_scope(owner, respect_consent=respect_consent)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT visible.id FROM ({sql}) AS visible (id, embedding)", params)
            return {row[0] for row in cursor.fetchall()}

    assert passing(alice, True) == {open_memory.pk}
    assert passing(alice, False) == {open_memory.pk, gated_memory.pk}
    assert passing(mallory, True) == {mallorys.pk}


def _as_loaded(memory_row: Memory) -> tuple:
    """Everything a surface reads from a loaded memory, its participants and people."""
    fields = tuple(getattr(memory_row, field.attname) for field in fusion._LOADED_MEMORY_FIELDS)
    source = memory_row.source_person
    people = tuple(
        (
            participant.pk,
            participant.role,
            participant.memory_id,
            tuple(getattr(participant.person, field.attname) for field in fusion._PERSON_FIELDS),
        )
        for participant in memory_row.participants.all()
    )
    return fields, None if source is None else source.pk, people


def test_load_gives_what_the_orm_gives_with_people_and_no_further_queries(
    alice, mallory, django_assert_num_queries
):
    # _load builds the memories from plain SQL and puts participants and people
    # where select_related/prefetch_related would: same values, same order, and
    # reading them afterwards runs no query.
    zoe, adam = person(alice, "Zoe"), person(alice, "Adam", ConsentStatus.PENDING)
    adam.aliases = ["Ad", "Addy"]
    adam.save()
    teller = person(alice, "Teller")
    both = memory(alice, "both of them", people=[zoe, adam], source_person=teller, sensitivity="sensitive")
    told = memory(alice, "told only", source_person=zoe)
    alone = memory(alice, "nobody", angle=None)
    theirs = memory(mallory, "mallory's")
    ids = [both.pk, told.pk, alone.pk, theirs.pk]

    visible = gate._compiled_scope(alice, respect_consent=False)
    # The memories with their participants and people, then the one source nobody is in.
    with django_assert_num_queries(2):
        loaded = fusion._load(visible, ids)
    expected = {m.pk: m for m in fusion._with_people(Memory.objects.filter(pk__in=ids, owner=alice))}

    assert set(loaded) == {both.pk, told.pk, alone.pk}  # never another owner's
    with django_assert_num_queries(0):
        for memory_id, expected_memory in expected.items():
            assert _as_loaded(loaded[memory_id]) == _as_loaded(expected_memory)
            assert all(p.memory is loaded[memory_id] for p in loaded[memory_id].participants.all())
    assert [p.person.display_name for p in loaded[both.pk].participants.all()] == ["Adam", "Zoe"]
    # Deferred, as the ORM's .defer() leaves them: read only when asked for.
    assert loaded[both.pk].get_deferred_fields() == {"embedding", "search_vector"}
    # Through the gate: Adam has not consented, so agents get only what passes.
    gated = fusion._load(gate._compiled_scope(alice, respect_consent=True), ids)
    assert set(gated) == {told.pk, alone.pk}


def _vector_inline(memory_id) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_toast_chunk_id(embedding) IS NULL FROM memories_memory WHERE id = %s",
            [memory_id],
        )
        return cursor.fetchone()[0]


def test_vectors_stay_in_the_row_of_a_journal_sized_memory(alice):
    # pgvector stores vectors EXTERNAL: a row past ~2 KB (a vector is 1.5 KB, a few
    # hundred words of body and their text vector) had its vector moved out of line,
    # and every distance then read it through the TOAST table (migration 0010).
    body = " ".join(f"word{n} meadow lantern orchard" for n in range(120))  # ~3 KB with its text vector
    huge_body = "x " * 20_000 + " ".join(f"w{n}" for n in range(3000))

    assert _vector_inline(memory(alice, body).pk)
    # A body too long for any page gives way first; the vector stays.
    assert _vector_inline(memory(alice, huge_body).pk)

    # What the migration changed: with pgvector's own storage the same row loses it.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE waits for no deferred trigger
        cursor.execute(BACKWARD)
    assert not _vector_inline(memory(alice, body).pk)


def test_agents_search_goes_exact_when_the_owners_open_memories_are_a_thin_share_of_the_index(
    alice, monkeypatch, unbounded_index_scans
):
    # Beside a million other open memories, an owner with a few thousand open ones
    # would make the bounded index scan come back short; the exact path answers at
    # once, with the same (exact) result.
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 2)
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    created = [memory(alice, f"lantern {n}", angle=0.1 * n) for n in range(6)]
    hidden = memory(alice, "lantern hidden", angle=0.05, people=[person(alice, "Pat", ConsentStatus.PENDING)])
    taken = []
    original = knn_open._open_candidates_neighbours

    def recording(*args, **kwargs):
        taken.append(kwargs["open_count"])
        return original(*args, **kwargs)

    monkeypatch.setattr(knn_open, "_open_candidates_neighbours", recording)

    monkeypatch.setattr(hints, "_open_index_rows", lambda: 10)  # this owner: most of the index
    assert agent_ids(alice, "zebra", limit=3) == [m.pk for m in created[:3]]
    assert taken == []
    monkeypatch.setattr(hints, "_open_index_rows", lambda: 10**12)  # a sliver of it
    assert agent_ids(alice, "zebra", limit=3) == [m.pk for m in created[:3]]
    assert taken == [6]
    assert hidden.pk not in agent_ids(alice, "zebra", limit=7)


def test_the_index_size_hint_is_read_from_the_statistics_and_kept_a_minute(
    monkeypatch, django_assert_num_queries
):
    monkeypatch.setattr(hints, "_RELATION_ROWS", {})
    with django_assert_num_queries(1):
        first = hints._open_index_rows()
        assert hints._open_index_rows() == first
    assert first >= 0
    monkeypatch.setattr(search_settings, "HINT_TTL_SECONDS", -1.0)
    with django_assert_num_queries(1):
        hints._open_index_rows()


def test_owner_search_widens_when_the_owner_is_a_thin_share_of_the_table(
    alice, monkeypatch, unbounded_index_scans
):
    # The index of all memories meets an owner's memories at the rate of their share
    # of the table: ef_search grows as the share shrinks (up to pgvector's 1,000).
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    created = [memory(alice, f"lantern {n}", angle=0.1 * n) for n in range(5)]
    settings = []
    original = statements._set_hnsw

    def recording(*, ef_search, max_scan_tuples):
        settings.append(ef_search)
        original(ef_search=ef_search, max_scan_tuples=max_scan_tuples)

    monkeypatch.setattr(statements, "_set_hnsw", recording)
    monkeypatch.setattr(hints, "_relation_rows", lambda name: 10**9)  # big enough to scan at any share
    # Hybrid search fetches 40 candidates: 3 per row (120) for an owner alone.
    for share, expected in ((1.0, 120), (0.5, 240), (0.2, 600), (0.0001, 1000)):
        monkeypatch.setattr(hints, "_owner_share", lambda owner_id, share=share: share)
        settings.clear()
        hits = memory_search(alice, "zebra", limit=3, query_embedding=toward(0))
        assert [hit.memory.pk for hit in hits] == [m.pk for m in created[:3]]
        assert settings == [expected]


def test_owner_share_is_read_from_the_planners_statistics(alice, mallory, monkeypatch):
    for n in range(30):
        memory(alice, f"a {n}")
    for n in range(10):
        memory(mallory, f"m {n}")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
    monkeypatch.setattr(hints, "_OWNER_SHARES", [])

    alices, mallorys = hints._owner_share(alice.pk), hints._owner_share(mallory.pk)

    assert 0 < mallorys < alices <= 1.0
    assert alices == pytest.approx(30 / Memory.objects.count(), abs=0.05)
    # An owner the statistics do not list: at most the least common listed share.
    assert hints._owner_share(10**9) <= mallorys


def test_a_small_owner_too_thin_for_any_scan_gets_exact_search_at_once(alice, monkeypatch):
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    created = [memory(alice, f"lantern {n}", angle=0.1 * n) for n in range(5)]
    scans = []
    monkeypatch.setattr(statements, "_set_hnsw", lambda **settings: scans.append(settings))
    # 0.1% of a table of a million: about 1,000 memories, too few for ef_search 1,000 to meet 40.
    monkeypatch.setattr(hints, "_owner_share", lambda owner_id: 0.001)
    monkeypatch.setattr(hints, "_relation_rows", lambda name: 1_000_000)

    hits = memory_search(alice, "zebra", limit=3, query_embedding=toward(0))

    assert [hit.memory.pk for hit in hits] == [m.pk for m in created[:3]]
    assert scans == []  # no index scan: exact
    # A big owner at the same share (0.1% of a billion) still scans.
    monkeypatch.setattr(hints, "_relation_rows", lambda name: 10**9)
    memory_search(alice, "zebra", limit=3, query_embedding=toward(0))
    assert scans and scans[0]["ef_search"] == search_settings.ANN_EF_SEARCH_MAX


def test_loading_results_is_a_prepared_statement_and_the_same_without_one(alice, monkeypatch):
    # _load's statement is prepared once per connection (planned once, not per search);
    # with prepared statements off (DATABASE_PREPARED_STATEMENTS=false, behind a pooler in
    # transaction mode) an ordinary cursor runs the same statement, with the same answer.
    pending = person(alice, "Adam", ConsentStatus.PENDING)
    shown = memory(alice, "a lantern by the sea")
    memory(alice, "Adam's lantern", people=[pending])

    def agents_search() -> list:
        return [
            hit.memory.pk
            for hit in memory_search(alice, QUERY, respect_consent=True, query_embedding=toward(0))
        ]

    prepared = agents_search()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ['SELECT memory."id"%']
        )
        assert cursor.fetchone()[0] >= 1
    connection.ensure_connection()
    monkeypatch.setattr(connection.connection, "prepare_threshold", None)
    assert agents_search() == prepared == [shown.pk]


def _plan(queryset, *, analyze: bool) -> dict:
    """The queryset's plan tree (EXPLAIN, FORMAT JSON; ANALYZE runs it)."""
    import json

    with connection.cursor() as cursor:
        sql, params = queryset.query.sql_with_params()
        cursor.execute(f"EXPLAIN ({'ANALYZE, ' if analyze else ''}FORMAT JSON) {sql}", params)
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return plan[0]["Plan"]


def _participant_subplan_loops(queryset) -> list[int]:
    """How often each participant scan that is a subplan of its own ran (EXPLAIN ANALYZE)."""
    loops = []

    def walk(node):
        if (
            node.get("Parent Relationship") == "SubPlan"
            and node.get("Relation Name") == "memories_memoryparticipant"
        ):
            loops.append(node["Actual Loops"])
        for child in node.get("Plans", []):
            walk(child)

    walk(_plan(queryset, analyze=True))
    return loops


def test_the_gate_asks_about_self_before_looking_for_participants(alice):
    # "Nobody in it, or Self granted": with Self granted (as sign-up makes it) the
    # participant lookup of that OR never runs. The other way round PostgreSQL may hash
    # every participant id of the table before the first row of an agent's page.
    grace = person(alice, "Grace")
    for index in range(30):
        memory(alice, f"day {index}", people=[grace] if index % 2 else [])
    page = agent_visible_memories(alice).order_by("-occurred_at", "pk")[:20]
    granted = _participant_subplan_loops(page)
    assert granted and all(loops == 0 for loops in granted)
    assert len(list(page)) == 20

    self_person = Person.objects.get(owner=alice, is_self=True)
    person_set_consent(person=self_person, status=ConsentStatus.REVOKED, actor=alice)
    revoked = _participant_subplan_loops(page)
    assert any(loops > 0 for loops in revoked)
    assert len(list(agent_visible_memories(alice))) == 15


def _participants_read_outside_subplans(queryset) -> list[str]:
    """The plan's nodes that read participants as part of the main query (a join), not per row."""
    found = []

    def walk(node, in_subplan: bool) -> None:
        in_subplan = in_subplan or node.get("Parent Relationship") in ("SubPlan", "InitPlan")
        if node.get("Relation Name") == "memories_memoryparticipant" and not in_subplan:
            found.append(node["Node Type"])
        for child in node.get("Plans", []):
            walk(child, in_subplan)

    walk(_plan(queryset, analyze=False), False)
    return found


def test_the_gate_probes_participants_per_memory_whatever_the_statistics_say(alice):
    # With statistics saying every person has granted (nothing to refuse), PostgreSQL
    # pulled the participant check up into an anti-join and, for an agent's search,
    # gathered every ungranted participant of the table before the first row (a read of
    # all of them: 23 ms at 100,000; agents' kNN p50 20 ms where 5-6 ms will do). The
    # check is a subplan, probed for the memories a statement looks at.
    friends = [person(alice, f"Friend {index}") for index in range(10)]
    for index in range(200):
        memory(alice, f"day {index}", angle=0.001 * index, people=[friends[index % 10]])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE people_person")
        cursor.execute("ANALYZE memories_memoryparticipant")
    from pgvector.django import CosineDistance

    nearest = agent_visible_memories(alice).order_by(CosineDistance("embedding", toward(0.05)))[:5]
    page = agent_visible_memories(alice).order_by("-occurred_at", "pk")[:5]

    for queryset in (nearest, page):
        assert _participants_read_outside_subplans(queryset) == []
        assert len(list(queryset)) == 5
    # ... and the gate still refuses: one friend withdraws, their memories leave.
    person_set_consent(person=friends[0], status=ConsentStatus.REVOKED, actor=alice)
    assert agent_visible_memories(alice).count() == 180


def _setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s)", [name])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)  # SET LOCAL ends with the real transaction, not a savepoint
@pytest.mark.parametrize("pipelined", [False, True], ids=["django's atomic", "pipelined"])
def test_a_search_transaction_plans_every_statement_without_parallel_workers(
    settings, pipelined, monkeypatch
):
    from django.test.utils import CaptureQueriesContext

    settings.SEARCH_PIPELINE = pipelined
    monkeypatch.setattr(search_settings, "ANN_SCAN_MEM_MULTIPLIER", 3)
    server = _setting("max_parallel_workers_per_gather")
    assert server != "0"  # the server's own setting, which a search turns off for itself
    # Any first statement runs with the setting in place.
    with statements._search_transaction():
        assert _setting("max_parallel_workers_per_gather") == "0"
    assert _setting("max_parallel_workers_per_gather") == server
    # When the HNSW settings come first they carry it: no statement of its own.
    with CaptureQueriesContext(connection) as queries, statements._search_transaction():
        statements._set_hnsw(ef_search=70, max_scan_tuples=5000)
        assert _setting("max_parallel_workers_per_gather") == "0"
        assert _setting("hnsw.ef_search") == "70"
    sent = [query["sql"] for query in queries.captured_queries if query["sql"] not in ("BEGIN", "COMMIT")]
    if pipelined:
        # Each its own statement, all sent with the first read (tests/memories/test_search_round_trips.py).
        assert len(sent) == 4, sent
        assert "max_parallel_workers_per_gather" in sent[0] and "hnsw.ef_search" in sent[1]
    else:
        assert len(sent) == 3, sent  # the settings, then the two reads
        assert "max_parallel_workers_per_gather" in sent[0] and "hnsw.ef_search" in sent[0]
    # The scan's bounds with it, for the search only.
    with statements._search_transaction():
        statements._set_hnsw(ef_search=70, max_scan_tuples=5000)
        assert _setting("hnsw.max_scan_tuples") == "5000"
        assert _setting("hnsw.scan_mem_multiplier") == "3"
    assert _setting("hnsw.max_scan_tuples") != "5000" and _setting("hnsw.scan_mem_multiplier") != "3"
    # Nested: the inner transaction (a savepoint) sets it again; the outer keeps it after.
    with statements._search_transaction():
        with statements._search_transaction():
            assert _setting("max_parallel_workers_per_gather") == "0"
        assert _setting("max_parallel_workers_per_gather") == "0"
    assert _setting("max_parallel_workers_per_gather") == server
    assert getattr(statements._SEARCH_SETTINGS, "current", None) is None


def _agents_nearest(owner, limit: int) -> list:
    """The agents' vector side as memory_search runs it without filters (the gate compiled once)."""
    from benchmarks.searches import nearest_ids

    scope = retrieval.memory_scope(owner, respect_consent=True)
    return nearest_ids(scope, toward(0.0), owner_id=owner.pk, limit=limit, gated=True)


@pytest.mark.parametrize("hidden_nearest", [0, 12], ids=["the nearest pass", "the nearest hidden"])
def test_the_agents_index_takes_its_nearest_by_id_and_scans_on_when_too_few_pass(
    alice, monkeypatch, unbounded_index_scans, hidden_nearest
):
    # Without filters the agents' index statement first ranks the index's nearest few through
    # the gate by id (a statement planned once per connection); when the lifecycle hides too
    # many of them, the scan that goes on until enough pass answers. The same answer as that
    # scan alone, and never a gated or hidden memory.
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    monkeypatch.setattr(search_settings, "EXACT_FALLBACK_MAX_MEMORIES", 0)
    expired = timezone.now() - timedelta(days=1)
    hidden = [
        memory(alice, f"expired {n}", angle=0.001 * n, expires_at=expired) for n in range(hidden_nearest)
    ]
    # Hidden: fewer than the 4 asked can pass among the 8 candidates, whichever 8 the index gives.
    shown = [memory(alice, f"lantern {n}", angle=0.1 + 0.01 * n) for n in range(3 if hidden else 8)]
    gated = memory(alice, "gated", angle=0.05, people=[person(alice, "Pat", ConsentStatus.PENDING)])
    sent: list[str] = []
    original = statements._fetch_prepared

    def recording(sql, params, **options):
        if "owner_id + 0" in sql:
            sent.append("nearest by id")
        elif "ORDER BY gate.embedding <=>" in sql:
            sent.append("scan")
        return original(sql, params, **options)

    monkeypatch.setattr(statements, "_fetch_prepared", recording)
    found = _agents_nearest(alice, limit=2)  # fetches 4: 8 candidates
    assert found == [m.pk for m in shown[:2]]
    assert sent == (["nearest by id"] if not hidden else ["nearest by id", "scan"])
    assert not {gated.pk, *(m.pk for m in hidden)} & set(_agents_nearest(alice, limit=10))

    sent.clear()
    monkeypatch.setattr(search_settings, "OPEN_ANN_PLANNED_ONCE", False)
    assert _agents_nearest(alice, limit=2) == found
    assert sent == ["scan"]
