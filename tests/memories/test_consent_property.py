"""Property test: every agent-facing selector against an independent reference policy.

Hypothesis generates small worlds (two or three owners, people with random consent,
memories with random participants, roles, source people, expiry, supersession,
texts from a small vocabulary and random vectors or none, stored edges) and random
queries. The world is written to PostgreSQL inside a savepoint that is rolled back
after each example, and the production selectors are compared with
tests/memories/consent_oracle.py, which shares no code with them.

Quick by default (the "default" profile); `--hypothesis-profile=thorough` runs
thousands of examples.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from memories.gate_explain import memory_agent_visibility
from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryEdge, MemoryGate, MemoryParticipant
from memories.retrieval import (
    NO_CUTOFF,
    agent_visible_memories,
    memory_related,
    memory_search,
    memory_similar,
)
from memories.search import settings as search_settings
from memories.selectors import MemoryFilters
from people.models import Person
from tests.factories import UserFactory
from tests.memories.consent_oracle import (
    OracleEdge,
    OracleMemory,
    OraclePerson,
    OracleWorld,
)
from tests.privacy import privacy_settings

pytestmark = pytest.mark.django_db

# No stop words, and no two words share an English stem: "contains the word" is
# then exactly what PostgreSQL full text matches (see the oracle).
VOCABULARY = ["lantern", "orchard", "violin", "harbor", "meadow", "glacier", "pepper", "quilt"]
STATUSES = ["granted", "pending", "revoked"]
ROLES = ["subject", "present", "source"]
KINDS = ["knowledge", "event", "preference"]
DISTANCE_TOLERANCE = 1e-4


def unit_vector(seed: int) -> tuple[float, ...]:
    vector = np.random.default_rng(seed).standard_normal(EMBEDDING_DIMENSIONS)
    return tuple(float(value) for value in vector / np.linalg.norm(vector))


person_spec = st.fixed_dictionaries(
    {"status": st.sampled_from(STATUSES), "owner": st.integers(0, 2), "is_self": st.booleans()}
)
memory_spec = st.fixed_dictionaries(
    {
        "owner": st.integers(0, 2),
        "words": st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4),
        "kind": st.sampled_from(KINDS),
        "vector_seed": st.none() | st.integers(0, 10_000),
        "participants": st.lists(
            st.tuples(st.integers(0, 11), st.sampled_from(ROLES)), max_size=3, unique_by=lambda pair: pair[0]
        ),
        "source": st.none() | st.integers(0, 11),
        "expiry": st.sampled_from([None, "past", "future"]),
        "superseded_by": st.none() | st.integers(0, 13),
        "days_ago": st.integers(0, 1000),
        # Sensitive ones reach only agents cleared for them (SPEC §3).
        "sensitivity": st.sampled_from(["personal", "personal", "public", "sensitive"]),
    }
)
world_spec = st.fixed_dictionaries(
    {
        "owners": st.integers(2, 3),
        "people": st.lists(person_spec, min_size=1, max_size=12),
        "memories": st.lists(memory_spec, min_size=1, max_size=14),
        "edges": st.lists(st.tuples(st.integers(0, 13), st.integers(0, 13), st.floats(0, 1)), max_size=10),
    }
)
query_spec = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from([*VOCABULARY, "zebra"]), min_size=1, max_size=2),
        # Always given: with none, memory_search would embed the words with the real model.
        "vector_seed": st.integers(0, 10_000),
        "owner": st.integers(0, 2),
        "limit": st.integers(1, 20),
        "anchor": st.integers(0, 13),
        "filter_person": st.none() | st.integers(0, 11),
        "filter_kind": st.none() | st.sampled_from(KINDS),
    }
)


class _Rollback(Exception):
    pass


def build_world(spec: dict) -> tuple[OracleWorld, list, dict[str, Person], dict[str, Memory]]:
    """Write the world to the database and describe it to the oracle, identically."""
    now = timezone.now()
    owners = [UserFactory(with_self=False) for _ in range(spec["owners"])]
    world = OracleWorld()
    people: dict[str, Person] = {}
    has_self: set[int] = set()
    for index, item in enumerate(spec["people"]):
        owner = owners[item["owner"] % len(owners)]
        is_self = item["is_self"] and owner.pk not in has_self  # one Self per owner
        if is_self:
            has_self.add(owner.pk)
        person = Person.objects.create(
            owner=owner, display_name=f"P{index}", consent_status=item["status"], is_self=is_self
        )
        people[str(person.pk)] = person
        world.people[str(person.pk)] = OraclePerson(
            id=str(person.pk), owner=str(owner.pk), consent_status=item["status"], is_self=is_self
        )
    person_list = list(people.values())
    memories: dict[str, Memory] = {}
    memory_list: list[Memory] = []
    for item in spec["memories"]:
        owner = owners[item["owner"] % len(owners)]
        mine = [person for person in person_list if person.owner_id == owner.pk]
        vector = None if item["vector_seed"] is None else unit_vector(item["vector_seed"])
        expires_at = {None: None, "past": now - timedelta(hours=1), "future": now + timedelta(days=3)}[
            item["expiry"]
        ]
        source = mine[item["source"] % len(mine)] if mine and item["source"] is not None else None
        memory = Memory.objects.create(
            id=uuid.uuid4(),
            owner=owner,
            body=" ".join(item["words"]),
            kind=item["kind"],
            occurred_at=now - timedelta(days=item["days_ago"]),
            embedding=None if vector is None else list(vector),
            expires_at=expires_at,
            source_person=source,
            sensitivity=item["sensitivity"],
        )
        participants = {}
        if mine:
            for position, role in item["participants"]:
                person = mine[position % len(mine)]
                if str(person.pk) not in participants:
                    MemoryParticipant.objects.create(memory=memory, person=person, role=role)
                    participants[str(person.pk)] = role
        memories[str(memory.pk)] = memory
        memory_list.append(memory)
        world.memories[str(memory.pk)] = OracleMemory(
            id=str(memory.pk),
            owner=str(owner.pk),
            words=list(item["words"]),
            kind=item["kind"],
            occurred_at=memory.occurred_at,
            embedding=vector,
            participants=participants,
            source_person=None if source is None else str(source.pk),
            expires_at=expires_at,
            sensitivity=item["sensitivity"],
        )
    # Supersession only within one owner, never a memory superseding itself.
    for memory, item in zip(memory_list, spec["memories"], strict=True):
        if item["superseded_by"] is None:
            continue
        newer = memory_list[item["superseded_by"] % len(memory_list)]
        if newer.pk != memory.pk and newer.owner_id == memory.owner_id:
            Memory.objects.filter(pk=memory.pk).update(superseded_by=newer)
            world.memories[str(memory.pk)].superseded_by = str(newer.pk)
    for source_index, target_index, weight in spec["edges"]:
        source = memory_list[source_index % len(memory_list)]
        target = memory_list[target_index % len(memory_list)]
        if source.pk == target.pk or source.owner_id != target.owner_id:
            continue
        _, created = MemoryEdge.objects.get_or_create(
            owner_id=source.owner_id,
            source=source,
            target=target,
            kind="similar",
            defaults={"weight": weight},
        )
        if created:
            world.edges.append(OracleEdge(str(source.pk), str(target.pk), "similar", weight))
    return world, owners, people, memories


def assert_same_ranking(actual: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """Same distances position by position; the same ids wherever distances are not tied."""
    assert len(actual) == len(expected)
    for (_, actual_distance), (_, expected_distance) in zip(actual, expected, strict=True):
        assert abs(actual_distance - expected_distance) < DISTANCE_TOLERANCE
    tied = {
        memory_id
        for memory_id, distance in expected
        if sum(abs(distance - other) < DISTANCE_TOLERANCE for _, other in expected) > 1
    }
    assert [i for i, _ in actual if i not in tied] == [i for i, _ in expected if i not in tied]


def check_world(spec: dict, query: dict):
    """Build the world, search as `query` says and check every answer; the owner searched."""
    world, owners, people, memories = build_world(spec)
    now = timezone.now()
    owner = owners[query["owner"] % len(owners)]
    owner_key = str(owner.pk)
    words = query["words"]
    embedding = unit_vector(query["vector_seed"])
    filter_person = None
    if query["filter_person"] is not None and people:
        filter_person = list(people.values())[query["filter_person"] % len(people)]
    filters = MemoryFilters(person=filter_person, kind=query["filter_kind"])
    limit = query["limit"]
    world_size = len(world.memories)

    # The gate itself, in both of its plans: probed memory by memory (searches, pages)
    # and planned for the whole journal (a count).
    # Both with and without the agent's clearance for sensitive memories.
    for cleared in (False, True):
        gated = set(world.visible(owner_key, respect_consent=True, now=now, may_read_sensitive=cleared))
        for whole_journal in (False, True):
            shown = agent_visible_memories(owner, may_read_sensitive=cleared, whole_journal=whole_journal)
            assert {str(pk) for pk in shown.values_list("pk", flat=True)} == gated
            assert shown.count() == len(gated)

    # The owner's badges ("Hidden from agents", and why) come from memory_agent_visibility,
    # beside the gate: it says hidden exactly when the gate (without a clearance) hides it.
    gated = set(world.visible(owner_key, respect_consent=True, now=now))
    own = (
        Memory.objects.filter(owner=owner)
        .select_related("source_person")
        .prefetch_related("participants__person")
    )
    for memory in own:
        assert memory_agent_visibility(memory, now=now).hidden == (str(memory.pk) not in gated), memory.pk

    # The owner; an agent without the clearance for sensitive memories; one with it.
    for respect_consent, cleared in ((True, False), (False, False), (True, True)):
        candidates = world.visible(
            owner_key,
            respect_consent=respect_consent,
            now=now,
            person=None if filter_person is None else str(filter_person.pk),
            kind=query["filter_kind"],
            may_read_sensitive=cleared,
        )
        findable = world.text_matches(candidates, words)
        findable |= {memory_id for memory_id, _ in world.nearest(candidates, embedding)}

        # memory_search: never anything outside the candidates; with a limit covering
        # the world, exactly the findable ones; otherwise as many as asked (or all).
        # Without the relevance cut-off (random vectors are all far apart): this checks
        # the gate; tests/memories/test_relevance.py checks that the cut-off only removes.
        hits = memory_search(
            owner,
            " ".join(words),
            respect_consent=respect_consent,
            limit=limit,
            filters=filters,
            query_embedding=embedding,
            relevance=NO_CUTOFF,
            may_read_sensitive=cleared,
        )
        returned = [str(hit.memory.pk) for hit in hits]
        assert len(returned) == len(set(returned))
        assert set(returned) <= set(candidates)
        assert len(returned) == min(limit, len(findable))
        everything = memory_search(
            owner,
            " ".join(words),
            respect_consent=respect_consent,
            limit=max(world_size, 1),
            filters=filters,
            query_embedding=embedding,
            relevance=NO_CUTOFF,
            may_read_sensitive=cleared,
        )
        assert {str(hit.memory.pk) for hit in everything} == findable
        if not world.text_matches(candidates, words):
            # Only the vector side matched: the order is the exact nearest order.
            expected = world.nearest(candidates, embedding)[:limit]
            assert_same_ranking([(str(hit.memory.pk), 1.0 - hit.similarity) for hit in hits], expected)

        # memory_similar and memory_related around an anchor memory of this owner.
        own = [memory for memory in memories.values() if memory.owner_id == owner.pk]
        if not own:
            continue
        anchor = own[query["anchor"] % len(own)]
        anchor_oracle = world.memories[str(anchor.pk)]
        scope = world.visible(owner_key, respect_consent=respect_consent, now=now, may_read_sensitive=cleared)
        anchor_visible = str(anchor.pk) in scope

        similar = memory_similar(
            anchor, respect_consent=respect_consent, limit=limit, may_read_sensitive=cleared
        )
        if respect_consent and not anchor_visible or anchor_oracle.embedding is None:
            assert similar == []
        else:
            expected = world.nearest(scope, anchor_oracle.embedding, exclude=str(anchor.pk))[:limit]
            assert_same_ranking([(str(hit.memory.pk), 1.0 - hit.score) for hit in similar], expected)

        related = memory_related(
            anchor, respect_consent=respect_consent, limit=100, may_read_sensitive=cleared
        )
        related_ids = {str(hit.memory.pk) for hit in related}
        assert related_ids <= set(scope) - {str(anchor.pk)}
        if not respect_consent:
            # Nothing of the owner's is lost: every stored edge shows.
            assert related_ids == world.edge_neighbours(anchor_oracle)
        elif not anchor_visible:
            assert related == []
        else:
            surely_similar, maybe_similar = set(), set()
            if anchor_oracle.embedding is not None:
                nearest = world.nearest(scope, anchor_oracle.embedding, exclude=str(anchor.pk))
                top = nearest[: django_settings.MEMORY_EDGES_SIMILAR_LIMIT]
                minimum = django_settings.MEMORY_EDGES_SIMILAR_MIN_SIMILARITY
                surely_similar = {i for i, distance in top if 1.0 - distance >= minimum + DISTANCE_TOLERANCE}
                maybe_similar = {i for i, distance in top if 1.0 - distance >= minimum - DISTANCE_TOLERANCE}
            shared = world.shared_person(scope, anchor_oracle)
            got_similar = {str(hit.memory.pk) for hit in related if hit.kind == "similar"}
            got_shared = {str(hit.memory.pk): hit.weight for hit in related if hit.kind == "shared_person"}
            assert surely_similar <= got_similar <= maybe_similar
            if len(shared) <= django_settings.MEMORY_EDGES_SHARED_PERSON_LIMIT:
                assert got_shared == {memory_id: float(count) for memory_id, count in shared.items()}
            else:
                assert set(got_shared) <= set(shared)
    return owner


@pytest.fixture(params=["candidates", "exact", "index"])
def vector_path(request, monkeypatch):
    """Every vector path: exact search over the memories the maintained gate count
    calls open, exact search, and the HNSW iterative scan; the gate is inside all three."""
    if request.param != "candidates":
        monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    if request.param == "index":
        monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
        monkeypatch.setattr(search_settings, "EXACT_FALLBACK_MAX_MEMORIES", 0)
        # Dead index entries of earlier tests and examples must not end the scan
        # (tests/index_scans.py).
        request.getfixturevalue("unbounded_index_scans")
    return request.param


@privacy_settings
@given(spec=world_spec, query=query_spec)
def test_agent_selectors_agree_with_the_reference_policy(vector_path, spec, query):
    # One savepoint per example, rolled back: every example starts from an empty world.
    try:
        with transaction.atomic():
            check_world(spec, query)
            raise _Rollback
    except _Rollback:
        pass


@pytest.mark.django_db(transaction=True)
@privacy_settings
@given(spec=world_spec, query=query_spec)
def test_searches_with_the_full_text_side_on_the_search_helper_agree_with_the_reference_policy(
    text_side_on_helper, spec, query
):
    """The same checks with each search's full-text side on the search helper's own connection.

    The helper (memories.search.statements._SideRunner) reads only what is committed, so each world
    is committed, checked and deleted, rather than rolled back.
    """
    from django.contrib.auth import get_user_model

    from portability.services import account_delete

    text_side_on_helper.clear()
    try:
        check_world(spec, query)
    finally:
        for user in get_user_model().objects.all():
            account_delete(user=user, password="correct horse battery")  # UserFactory's
    # Every memory_search of the example ran its full-text side on the helper.
    assert text_side_on_helper
    assert all(name.startswith("keepsake-search-side") for name in text_side_on_helper)


@pytest.mark.django_db(transaction=True)
@privacy_settings
@given(spec=world_spec, query=query_spec)
def test_searches_from_kept_copies_of_open_vectors_agree_with_the_reference_policy(
    kept_open_vectors, spec, query
):
    """The same checks with the agents' exact searches taking their candidates from a kept copy of
    the owner's open vectors (memories/open_vectors.py), as a web process does for an owner with
    thousands. Copies are used only in a search's own transaction, so each world is committed,
    checked and deleted."""
    from django.contrib.auth import get_user_model

    from portability.services import account_delete

    kept_open_vectors.clear()
    try:
        owner = check_world(spec, query)
        # Every try answered from the copy, unless the owner had no open, embedded memory to keep;
        # and the agents' searches tried whenever the owner had one.
        for owner_id, used in kept_open_vectors:
            assert (
                used
                or not MemoryGate.objects.filter(
                    owner_id=owner_id, blocked_count=0, embedding__isnull=False
                ).exists()
            )
        if MemoryGate.objects.filter(owner=owner, blocked_count=0, embedding__isnull=False).exists():
            assert (owner.pk, True) in kept_open_vectors
    finally:
        for user in get_user_model().objects.all():
            account_delete(user=user, password="correct horse battery")  # UserFactory's


@pytest.fixture
def text_side_on_helper(text_side_threads, settings):
    """The threads memory_search's full-text side ran in (text_side_threads), with the helper on."""
    settings.SEARCH_SIDES_IN_PARALLEL = True
    return text_side_threads
