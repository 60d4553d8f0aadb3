"""Every memory the API hands to an agent token is written to the access log."""

from __future__ import annotations

from agents.models import AccessLog


def _logged(world) -> list[tuple[object, str, object]]:
    return sorted(
        AccessLog.objects.filter(owner=world.alice).values_list("memory_id", "surface", "agent_id"),
        key=str,
    )


def test_agent_list_logs_each_memory_handed_out(world, agent_api):
    response = agent_api.get("/api/v1/memories/")
    assert response.status_code == 200
    returned = {item["id"] for item in response.json()["results"]}
    assert returned == {str(world.memory_with_carol.pk), str(world.memory_alone.pk)}
    assert _logged(world) == sorted(
        [
            (world.memory_with_carol.pk, "api", world.caregiver.pk),
            (world.memory_alone.pk, "api", world.caregiver.pk),
        ],
        key=str,
    )


def test_agent_retrieve_logs_the_memory(world, agent_api):
    assert agent_api.get(f"/api/v1/memories/{world.memory_with_carol.pk}/").status_code == 200
    assert _logged(world) == [(world.memory_with_carol.pk, "api", world.caregiver.pk)]


def test_agent_search_logs_only_what_it_returned(world, agent_api):
    response = agent_api.get("/api/v1/memories/search/", {"q": "tulips garden"})
    assert response.status_code == 200
    returned = [item["memory"]["id"] for item in response.json()["results"]]
    assert str(world.memory_with_bob.pk) not in returned
    assert {str(memory_id) for memory_id, _, _ in _logged(world)} == set(returned)


def test_hidden_memory_is_not_logged(world, agent_api):
    assert agent_api.get(f"/api/v1/memories/{world.memory_with_bob.pk}/").status_code == 404
    assert _logged(world) == []


def test_owner_reads_are_not_agent_access(world, owner_api):
    assert owner_api.get("/api/v1/memories/").status_code == 200
    assert owner_api.get(f"/api/v1/memories/{world.memory_with_bob.pk}/").status_code == 200
    assert _logged(world) == []
