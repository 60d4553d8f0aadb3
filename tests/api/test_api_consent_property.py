"""Property: through the REST API, an agent token never receives a memory the
consent policy forbids — list, retrieve, search or similar, before and after a
consent change.

Hypothesis builds random journals (people with random consent, memories with
random participants, sources, expiry, supersession, words and vectors) for one
owner plus a stranger; each world lives in a savepoint rolled back after the
example. The answers are compared with tests/memories/consent_oracle.py, a plain
Python statement of the policy that shares no code with the gate.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import TokenKind
from accounts.services import access_token_create, user_signup
from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryParticipant
from people.models import Person
from tests.agents.roles import AGENT_ROLES, PER_ROLE_EXAMPLES, agent_with_role
from tests.api.conftest import ApiClient
from tests.memories.consent_oracle import OracleMemory, OraclePerson, OracleWorld

pytestmark = pytest.mark.django_db

# No stop words and no shared English stems (see the oracle's text_matches).
VOCABULARY = ["lantern", "orchard", "violin", "harbor", "meadow", "glacier"]
STATUSES = ["granted", "pending", "revoked"]
ROLES = ["subject", "present", "source"]

memory_spec = st.fixed_dictionaries(
    {
        "words": st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3),
        "participants": st.lists(
            st.tuples(st.integers(0, 5), st.sampled_from(ROLES)), max_size=3, unique_by=lambda pair: pair[0]
        ),
        "source": st.none() | st.integers(0, 5),
        "vector_seed": st.none() | st.integers(0, 1000),
        "expiry": st.sampled_from([None, None, "past", "future"]),
        "superseded_by": st.none() | st.integers(0, 5),
    }
)
world_spec = st.fixed_dictionaries(
    {
        "people": st.lists(st.sampled_from(STATUSES), min_size=1, max_size=6),
        "memories": st.lists(memory_spec, min_size=1, max_size=6),
        "query": st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=2),
        "flip": st.tuples(st.integers(0, 5), st.sampled_from(STATUSES)),
        # Alice's own consent (Self): it gates her memories with nobody in them.
        "self_status": st.sampled_from(["granted", "granted", "pending", "revoked"]),
    }
)


def _vector(seed: int) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(-1, 1) for _ in range(8)] + [0.0] * (EMBEDDING_DIMENSIONS - 8)


def _build(spec: dict, agent_role: str):
    """Write the world to the database and describe it to the oracle."""
    now = timezone.now()
    alice = user_signup(username="prop-alice", password="correct horse battery")
    stranger = user_signup(username="prop-stranger", password="correct horse battery")
    oracle = OracleWorld()
    own = Person.objects.get(owner=alice, is_self=True)
    Person.objects.filter(pk=own.pk).update(consent_status=spec["self_status"])
    oracle.people[str(own.pk)] = OraclePerson(str(own.pk), "alice", spec["self_status"], is_self=True)
    people = []
    for index, status in enumerate(spec["people"]):
        person = Person.objects.create(owner=alice, display_name=f"P{index}", consent_status=status)
        people.append(person)
        oracle.people[str(person.pk)] = OraclePerson(str(person.pk), "alice", status)
    memories = []
    for index, m in enumerate(spec["memories"]):
        source = people[m["source"] % len(people)] if m["source"] is not None else None
        expires_at = {None: None, "past": now - timedelta(days=1), "future": now + timedelta(days=1)}[
            m["expiry"]
        ]
        vector = _vector(m["vector_seed"]) if m["vector_seed"] is not None else None
        memory = Memory.objects.create(
            owner=alice,
            body=" ".join(m["words"]),
            occurred_at=now - timedelta(hours=index),
            source_person=source,
            expires_at=expires_at,
            embedding=vector,
            embedded_at=now if vector else None,
        )
        participants = {}
        for person_index, role in m["participants"]:
            person = people[person_index % len(people)]
            if str(person.pk) not in participants:
                MemoryParticipant.objects.create(memory=memory, person=person, role=role)
                participants[str(person.pk)] = role
        memories.append(memory)
        oracle.memories[str(memory.pk)] = OracleMemory(
            id=str(memory.pk),
            owner="alice",
            words=m["words"],
            kind=memory.kind,
            occurred_at=memory.occurred_at,
            embedding=tuple(vector) if vector else None,
            participants=participants,
            source_person=str(source.pk) if source else None,
            expires_at=expires_at,
        )
    for memory, m in zip(memories, spec["memories"], strict=True):
        if m["superseded_by"] is not None:
            newer = memories[m["superseded_by"] % len(memories)]
            if newer.pk != memory.pk:
                Memory.objects.filter(pk=memory.pk).update(superseded_by=newer)
                oracle.memories[str(memory.pk)].superseded_by = str(newer.pk)
    # A stranger's memory that every gate would pass: it must still never appear.
    Memory.objects.create(owner=stranger, body=" ".join(VOCABULARY), embedding=_vector(1), embedded_at=now)
    agent = agent_with_role(owner=alice, role=agent_role)
    _, token = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=agent)
    return alice, people, oracle, ApiClient(Client(), token)


def _check_agent_sees_only_what_the_oracle_allows(
    api: ApiClient, oracle: OracleWorld, query: list[str] | None
) -> None:
    now = timezone.now()
    allowed = set(oracle.visible("alice", respect_consent=True, now=now))

    listed = api.get("/api/v1/memories/", {"limit": 100}).json()
    assert listed["consent_gated"] is True
    assert {m["id"] for m in listed["results"]} == allowed
    assert listed["count"] == len(allowed)

    for memory_id in oracle.memories:
        detail = api.get(f"/api/v1/memories/{memory_id}/")
        assert detail.status_code == (200 if memory_id in allowed else 404), memory_id
        similar = api.get(f"/api/v1/memories/{memory_id}/similar/", {"limit": 50, "respect_consent": "false"})
        if memory_id not in allowed:
            assert similar.status_code == 404
            continue
        body = similar.json()
        assert body["consent_gated"] is True
        returned = {hit["memory"]["id"] for hit in body["results"]}
        assert returned <= allowed - {memory_id}
        # Complete as well as safe: every embedded, allowed neighbour comes back.
        if oracle.memories[memory_id].embedding is not None:
            embedded = {m for m in allowed - {memory_id} if oracle.memories[m].embedding is not None}
            assert returned == embedded

    if query is None:
        return
    found = api.get(
        "/api/v1/memories/search/", {"q": " ".join(query), "limit": 50, "respect_consent": "false"}
    )
    body = found.json()
    assert body["consent_gated"] is True
    returned = {hit["memory"]["id"] for hit in body["results"]}
    assert returned <= allowed
    allowed_memories = {m: oracle.memories[m] for m in allowed}
    assert oracle.text_matches(allowed_memories, query) <= returned


@pytest.mark.parametrize("agent_role", AGENT_ROLES)
@settings(
    max_examples=PER_ROLE_EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(spec=world_spec)
def test_agent_token_never_receives_a_memory_the_policy_forbids(db, agent_role, spec) -> None:
    with transaction.atomic():
        alice, people, oracle, api = _build(spec, agent_role)

        # Search embeds its query with the real model (slow on a busy CPU): searched once per
        # world, after the consent change, where a stale answer would show.
        _check_agent_sees_only_what_the_oracle_allows(api, oracle, None)

        # Consent changes apply to the very next request.
        person_index, status = spec["flip"]
        person = people[person_index % len(people)]
        Person.objects.filter(pk=person.pk).update(consent_status=status)
        oracle.people[str(person.pk)].consent_status = status
        _check_agent_sees_only_what_the_oracle_allows(api, oracle, spec["query"])

        transaction.set_rollback(True)
