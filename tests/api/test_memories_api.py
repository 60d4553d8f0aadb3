from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryParticipant
from people.services import person_set_consent


def _vector(*leading: float) -> list[float]:
    return [*leading, *([0.0] * (EMBEDDING_DIMENSIONS - len(leading)))]


def _embed(memory: Memory, vector: list[float]) -> None:
    Memory.objects.filter(pk=memory.pk).update(
        embedding=vector, embedding_model="test", embedded_at=timezone.now()
    )


def _ids(results: list[dict]) -> set[str]:
    return {item["memory"]["id"] if "memory" in item else item["id"] for item in results}


# --- create / update / delete -------------------------------------------------------
def test_create_saves_memory_with_participants_and_reports_their_consent(owner_api, world) -> None:
    response = owner_api.post(
        "/api/v1/memories/",
        {
            "title": "Picnic",
            "body": "Picnic with Bob and Carol.",
            "kind": "event",
            "occurred_at": "2024-05-01T12:00:00Z",
            "participants": [
                {"person": str(world.bob.pk), "role": "present"},
                {"person": str(world.carol.pk)},
            ],
        },
    )

    assert response.status_code == 201
    body = response.json()
    participants = {p["display_name"]: p for p in body["participants"]}
    assert participants["Bob"] == {
        "person": str(world.bob.pk),
        "display_name": "Bob",
        "role": "present",
        "consent_status": "pending",
    }
    assert participants["Carol"]["role"] == "subject"
    assert participants["Carol"]["consent_status"] == "granted"
    assert body["embedding_status"] == "pending"
    memory = Memory.objects.get(pk=body["id"])
    assert (memory.owner, memory.kind, memory.occurred_at) == (
        world.alice,
        "event",
        datetime(2024, 5, 1, 12, tzinfo=UTC),
    )


def test_embedding_status_is_ready_once_embedded(owner_api, world) -> None:
    _embed(world.memory_alone, _vector(1.0))

    body = owner_api.get(f"/api/v1/memories/{world.memory_alone.pk}/").json()

    assert body["embedding_status"] == "ready"


@pytest.mark.parametrize("whose", ["mallory", "nobody"])
def test_participant_who_is_not_one_of_the_owners_people_is_400_and_nothing_written(
    owner_api, world, whose
) -> None:
    stranger = str(world.mallory_person.pk) if whose == "mallory" else "00000000-0000-4000-8000-000000000000"
    memories, participants = Memory.objects.count(), MemoryParticipant.objects.count()

    response = owner_api.post(
        "/api/v1/memories/",
        {"body": "Lunch.", "participants": [{"person": str(world.carol.pk)}, {"person": stranger}]},
    )

    assert response.status_code == 400
    assert response.json() == {"participants": [f"Unknown person: {stranger}."]}
    assert (Memory.objects.count(), MemoryParticipant.objects.count()) == (memories, participants)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "body"),
        ({"body": "   "}, "body"),
        ({"body": "x", "kind": "dream"}, "kind"),
        ({"body": "x", "sensitivity": "secret"}, "sensitivity"),
        ({"body": "x", "occurred_at": "yesterday"}, "occurred_at"),
        ({"body": "x", "participants": "Bob"}, "participants"),
        ({"body": "x", "participants": [{"person": "Bob"}]}, "participants"),
        ({"body": "x", "participants": [{"person": "BOB", "role": "villain"}]}, "participants"),
        ({"body": "x", "participants": [{"person": "BOB"}, {"person": "BOB"}]}, "participants"),
        ({"body": "x", "source_person": "MALLORY"}, "source_person"),
        ({"body": "x\x00y"}, "body"),
    ],
)
def test_invalid_memory_is_400_with_field_errors_and_nothing_written(
    owner_api, world, payload, field
) -> None:
    replacements = {"BOB": str(world.bob.pk), "MALLORY": str(world.mallory_person.pk)}

    def fill(value):
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return replacements.get(value, value)

    before = (Memory.objects.count(), MemoryParticipant.objects.count())

    response = owner_api.post("/api/v1/memories/", fill(payload))

    assert response.status_code == 400
    assert field in response.json()
    assert (Memory.objects.count(), MemoryParticipant.objects.count()) == before


def test_put_without_participants_is_refused_so_nobody_is_dropped_silently(owner_api, world) -> None:
    response = owner_api.put(f"/api/v1/memories/{world.memory_with_bob.pk}/", {"body": "Edited."})

    assert response.status_code == 400
    assert "participants" in response.json()
    assert world.memory_with_bob.participants.get().person == world.bob


def test_patch_changes_only_given_fields_and_keeps_participants(owner_api, world) -> None:
    response = owner_api.patch(f"/api/v1/memories/{world.memory_with_bob.pk}/", {"title": "Coffee"})

    assert response.status_code == 200
    memory = Memory.objects.get(pk=world.memory_with_bob.pk)
    assert (memory.title, memory.body) == ("Coffee", "Bob told me about his diagnosis over coffee.")
    assert [p["display_name"] for p in response.json()["participants"]] == ["Bob"]


def test_patch_with_participants_replaces_the_whole_set(owner_api, world) -> None:
    response = owner_api.patch(
        f"/api/v1/memories/{world.memory_with_bob.pk}/",
        {"participants": [{"person": str(world.carol.pk), "role": "source"}]},
    )

    assert response.status_code == 200
    assert [(p.person, p.role) for p in world.memory_with_bob.participants.all()] == [(world.carol, "source")]


def test_delete_removes_memory(owner_api, world) -> None:
    assert owner_api.delete(f"/api/v1/memories/{world.memory_alone.pk}/").status_code == 204
    assert not Memory.objects.filter(pk=world.memory_alone.pk).exists()


def test_agent_cannot_create_edit_or_delete_memories(agent_api, world) -> None:
    before = Memory.objects.count()
    url = f"/api/v1/memories/{world.memory_with_carol.pk}/"

    responses = [
        agent_api.post("/api/v1/memories/", {"body": "Agent-written"}),
        agent_api.patch(url, {"title": "Agent title"}),
        agent_api.put(url, {"body": "Agent body", "participants": []}),
        agent_api.delete(url),
    ]

    assert [r.status_code for r in responses] == [403, 403, 403, 403]
    assert Memory.objects.count() == before
    assert Memory.objects.get(pk=world.memory_with_carol.pk).title == "Tulips"


# --- list -----------------------------------------------------------------------------
def test_list_is_paginated_newest_first(owner_api, world) -> None:
    first = owner_api.get("/api/v1/memories/", {"limit": 2}).json()
    second = owner_api.get(first["next"]).json()

    assert first["count"] == 3 and first["previous"] is None
    assert len(first["results"]) == 2 and len(second["results"]) == 1
    assert second["next"] is None and second["previous"] is not None
    everything = [m["id"] for m in first["results"] + second["results"]]
    expected = [str(m.pk) for m in Memory.objects.filter(owner=world.alice).order_by("-occurred_at")]
    assert everything == expected


@pytest.mark.parametrize("api", ["owner_api", "agent_api"])
def test_a_list_page_leaves_the_vectors_in_the_database(api, world, request) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = request.getfixturevalue(api)
    for memory in (world.memory_alone, world.memory_with_carol):
        _embed(memory, _vector(1.0))
    with CaptureQueriesContext(connection) as queries:
        body = client.get("/api/v1/memories/").json()
    status = {item["id"]: item["embedding_status"] for item in body["results"]}
    assert status[str(world.memory_alone.pk)] == status[str(world.memory_with_carol.pk)] == "ready"
    reads = [query["sql"] for query in queries if 'FROM "memories_memory"' in query["sql"]]
    assert reads and not any('"memories_memory"."embedding"' in sql for sql in reads)
    assert not any('"memories_memory"."search_vector"' in sql for sql in reads)


def test_list_filters_by_person_kind_and_dates(owner_api, world) -> None:
    Memory.objects.filter(pk=world.memory_alone.pk).update(
        kind="observation", occurred_at=datetime(2020, 1, 15, 9, tzinfo=UTC)
    )

    by_person = owner_api.get("/api/v1/memories/", {"person": str(world.carol.pk)}).json()
    by_kind = owner_api.get("/api/v1/memories/", {"kind": "observation"}).json()
    by_dates = owner_api.get("/api/v1/memories/", {"date_from": "2020-01-15", "date_to": "2020-01-15"}).json()
    after = owner_api.get("/api/v1/memories/", {"date_from": "2020-01-16"}).json()

    assert _ids(by_person["results"]) == {str(world.memory_with_carol.pk)}
    assert _ids(by_kind["results"]) == {str(world.memory_alone.pk)}
    assert _ids(by_dates["results"]) == {str(world.memory_alone.pk)}
    assert str(world.memory_alone.pk) not in _ids(after["results"]) and after["count"] == 2


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 101},
        {"offset": -1},
        {"kind": "dream"},
        {"person": "bob"},
        {"date_from": "2024-13-01"},
        {"date_from": "2024-02-02", "date_to": "2024-02-01"},
    ],
)
def test_invalid_list_parameters_are_400(owner_api, world, params) -> None:
    response = owner_api.get("/api/v1/memories/", params)

    assert response.status_code == 400
    assert set(response.json()) & set(params)


def test_filtering_by_another_owners_person_is_400_not_a_leak(owner_api, world) -> None:
    response = owner_api.get("/api/v1/memories/", {"person": str(world.mallory_person.pk)})

    assert response.status_code == 400
    assert response.json() == {"person": ["Unknown person."]}


def test_agent_list_holds_only_gated_memories_and_counts_only_those(agent_api, world) -> None:
    body = agent_api.get("/api/v1/memories/").json()

    assert body["consent_gated"] is True
    assert _ids(body["results"]) == {str(world.memory_with_carol.pk), str(world.memory_alone.pk)}
    assert body["count"] == 2
    # A person who has not consented is, as a filter, exactly like an id nobody has:
    # an empty page for Bob beside a 400 for nobody would tell the agent he exists.
    by_bob = agent_api.get("/api/v1/memories/", {"person": str(world.bob.pk)})
    by_nobody = agent_api.get("/api/v1/memories/", {"person": "00000000-0000-4000-8000-000000000000"})
    assert (by_bob.status_code, by_bob.json()) == (400, {"person": ["Unknown person."]})
    assert (by_nobody.status_code, by_nobody.json()) == (by_bob.status_code, by_bob.json())


def test_owner_list_is_never_gated(owner_api, world) -> None:
    body = owner_api.get("/api/v1/memories/").json()

    assert body["consent_gated"] is False
    assert str(world.memory_with_bob.pk) in _ids(body["results"])


# --- retrieve ---------------------------------------------------------------------------
def test_gated_out_memory_is_a_404_identical_to_a_missing_one_for_agents(agent_api, world) -> None:
    hidden = agent_api.get(f"/api/v1/memories/{world.memory_with_bob.pk}/")
    missing = agent_api.get("/api/v1/memories/00000000-0000-4000-8000-000000000000/")

    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content


def test_revoking_consent_hides_the_memory_from_agents_on_the_next_request(agent_api, world) -> None:
    url = f"/api/v1/memories/{world.memory_with_carol.pk}/"
    assert agent_api.get(url).status_code == 200

    person_set_consent(person=world.carol, status="revoked", actor=world.alice)

    assert agent_api.get(url).status_code == 404
    assert agent_api.get(f"{url}similar/").status_code == 404


def test_memory_told_by_a_person_who_has_not_consented_is_hidden_from_agents(
    owner_api, agent_api, world
) -> None:
    created = owner_api.post(
        "/api/v1/memories/", {"body": "Heard about the merger.", "source_person": str(world.bob.pk)}
    ).json()

    assert created["source_person"] == str(world.bob.pk)
    assert agent_api.get(f"/api/v1/memories/{created['id']}/").status_code == 404


# --- search -----------------------------------------------------------------------------
def test_owner_search_sees_everything_unless_asking_for_consent(owner_api, world) -> None:
    everything = owner_api.get("/api/v1/memories/search/", {"q": "diagnosis", "scores": "1"}).json()
    gated = owner_api.get("/api/v1/memories/search/", {"q": "diagnosis", "respect_consent": "true"}).json()

    assert everything["consent_gated"] is False
    assert _ids(everything["results"]) == {str(world.memory_with_bob.pk)}
    # Ranking figures only when asked (scores=1): tests/memories/test_relevance.py.
    assert everything["results"][0]["score"] > 0
    assert gated == {"results": [], "consent_gated": True}


@pytest.mark.parametrize("respect_consent", ["false", "0", None])
def test_agent_search_is_always_gated_whatever_it_asks(agent_api, world, respect_consent) -> None:
    params = {"q": "diagnosis coffee"}
    if respect_consent is not None:
        params["respect_consent"] = respect_consent

    body = agent_api.get("/api/v1/memories/search/", params).json()

    assert body == {"results": [], "consent_gated": True}
    tulips = agent_api.get("/api/v1/memories/search/", {"q": "tulips", "respect_consent": "false"}).json()
    assert _ids(tulips["results"]) == {str(world.memory_with_carol.pk)}


@pytest.mark.parametrize("params", [{}, {"q": "  "}, {"q": "x", "limit": 0}, {"q": "x", "limit": "many"}])
def test_invalid_search_parameters_are_400(owner_api, world, params) -> None:
    response = owner_api.get("/api/v1/memories/search/", params)

    assert response.status_code == 400
    assert set(response.json()) & {"q", "limit"}


# --- similar -----------------------------------------------------------------------------
@pytest.fixture
def embedded_world(world):
    # Bob's memory is the nearest neighbour of Carol's; the lone walk is further away.
    _embed(world.memory_with_carol, _vector(1.0, 0.0))
    _embed(world.memory_with_bob, _vector(0.99, 0.1))
    _embed(world.memory_alone, _vector(0.5, 0.5))
    return world


def test_owner_similar_includes_everything_nearest_first(owner_api, embedded_world) -> None:
    w = embedded_world
    body = owner_api.get(f"/api/v1/memories/{w.memory_with_carol.pk}/similar/").json()

    assert body["consent_gated"] is False
    assert [r["memory"]["id"] for r in body["results"]] == [str(w.memory_with_bob.pk), str(w.memory_alone.pk)]


def test_agent_similar_never_includes_a_memory_without_consent(agent_api, owner_api, embedded_world) -> None:
    w = embedded_world
    url = f"/api/v1/memories/{w.memory_with_carol.pk}/similar/"

    agent_body = agent_api.get(url, {"respect_consent": "false"}).json()
    owner_gated = owner_api.get(url, {"respect_consent": "true"}).json()

    assert agent_body["consent_gated"] is True
    assert [r["memory"]["id"] for r in agent_body["results"]] == [str(w.memory_alone.pk)]
    assert owner_gated == agent_body


def test_the_memory_output_is_what_drfs_walk_over_its_fields_gives(world) -> None:
    from datetime import timedelta

    from rest_framework import serializers

    from memories.apis import MemoryOutputSerializer
    from memories.selectors import memory_list

    Memory.objects.filter(pk=world.memory_with_bob.pk).update(
        source_person=world.carol,
        expires_at=timezone.now() + timedelta(days=3),
        superseded_by=world.memory_alone,
        kind="event",
    )
    _embed(world.memory_with_carol, _vector(1.0))
    memories = list(memory_list(owner=world.alice))
    assert len(memories) == 3
    serializer = MemoryOutputSerializer()
    for memory in memories:
        direct = serializer.to_representation(memory)
        walked = serializers.Serializer.to_representation(serializer, memory)
        assert direct == walked
        assert list(direct) == list(serializer.fields)  # every field, in their order
    with_bob = serializer.to_representation(next(m for m in memories if m.pk == world.memory_with_bob.pk))
    assert with_bob["source_person"] == str(world.carol.pk) and with_bob["expires_at"].endswith("Z")
    assert with_bob["participants"][0]["display_name"] == "Bob"
