from __future__ import annotations

import pytest

from people.models import ConsentEvent, ConsentStatus, ConsentSurface, Person


def _by_name(results: list[dict]) -> dict[str, dict]:
    return {person["display_name"]: person for person in results}


def test_owner_lists_everyone_with_notes_and_memory_counts(owner_api, world) -> None:
    body = owner_api.get("/api/v1/people/").json()

    people = _by_name(body["results"])
    assert body["consent_gated"] is False
    assert set(people) == {"Self", "Bob", "Carol", "Dana"}
    assert people["Bob"]["notes"] == "Bob's private notes"
    assert people["Bob"]["aliases"] == ["Bobby"]
    assert people["Bob"]["memory_count"] == 1
    assert people["Self"]["is_self"] is True


def test_agent_sees_only_people_who_granted_consent_and_no_counts_or_edit_times(agent_api, world) -> None:
    body = agent_api.get("/api/v1/people/").json()

    people = _by_name(body["results"])
    assert body["consent_gated"] is True
    assert set(people) == {"Self", "Carol"}
    assert people["Carol"]["notes"] == "Carol likes tulips"
    assert people["Carol"]["aliases"] == ["Caz"]
    assert all(person["memory_count"] is None for person in people.values())
    assert all(person["updated_at"] is None for person in people.values())
    hidden = agent_api.get(f"/api/v1/people/{world.bob.pk}/")
    assert hidden.status_code == 404
    assert "Bob" not in hidden.content.decode()


def test_agent_stops_seeing_a_person_the_moment_consent_is_revoked(owner_api, agent_api, world) -> None:
    assert agent_api.get(f"/api/v1/people/{world.carol.pk}/").json()["notes"] == "Carol likes tulips"

    owner_api.post(f"/api/v1/people/{world.carol.pk}/consent/", {"status": "revoked"})

    assert agent_api.get(f"/api/v1/people/{world.carol.pk}/").status_code == 404
    assert "Carol" not in agent_api.get("/api/v1/people/").content.decode()


def test_created_person_starts_pending_even_if_the_client_asks_otherwise(owner_api, world) -> None:
    response = owner_api.post(
        "/api/v1/people/",
        {"display_name": "  Hugo ", "aliases": ["H", "H", " "], "kind": "pet", "consent_status": "granted"},
    )

    assert response.status_code == 201
    body = response.json()
    assert body["consent_status"] == "pending"
    assert (body["display_name"], body["aliases"], body["kind"]) == ("Hugo", ["H"], "pet")
    assert Person.objects.get(pk=body["id"]).owner == world.alice


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({}, "display_name"),
        ({"display_name": "   "}, "display_name"),
        ({"display_name": "x" * 201}, "display_name"),
        ({"display_name": "Ivy", "kind": "robot"}, "kind"),
        ({"display_name": "Ivy", "aliases": "not a list"}, "aliases"),
        ({"display_name": "Ivy\x00"}, "display_name"),
        ({"display_name": "Ivy", "notes": None}, "notes"),
    ],
)
def test_invalid_person_is_400_with_field_errors_and_nothing_saved(owner_api, world, payload, field) -> None:
    before = Person.objects.count()

    response = owner_api.post("/api/v1/people/", payload)

    assert response.status_code == 400
    assert field in response.json()
    assert Person.objects.count() == before


def test_patch_changes_only_the_given_fields(owner_api, world) -> None:
    response = owner_api.patch(f"/api/v1/people/{world.bob.pk}/", {"notes": "Moved to Leeds"})

    assert response.status_code == 200
    world.bob.refresh_from_db()
    assert (world.bob.display_name, world.bob.aliases, world.bob.notes) == (
        "Bob",
        ["Bobby"],
        "Moved to Leeds",
    )


def test_put_replaces_details_but_never_consent(owner_api, world) -> None:
    response = owner_api.put(
        f"/api/v1/people/{world.bob.pk}/", {"display_name": "Robert", "consent_status": "granted"}
    )

    assert response.status_code == 200
    world.bob.refresh_from_db()
    assert (world.bob.display_name, world.bob.aliases, world.bob.notes) == ("Robert", [], "")
    assert world.bob.consent_status == ConsentStatus.PENDING


def test_consent_change_is_recorded_with_surface_api(owner_api, world) -> None:
    response = owner_api.post(
        f"/api/v1/people/{world.bob.pk}/consent/", {"status": "granted", "reason": "He said yes"}
    )

    assert response.status_code == 200
    body = response.json()
    assert body["person"]["consent_status"] == "granted"
    assert body["event"]["old_status"] == "pending" and body["event"]["new_status"] == "granted"
    event = ConsentEvent.objects.get(pk=body["event"]["id"])
    assert (event.surface, event.reason, event.actor) == (ConsentSurface.API, "He said yes", world.alice)
    history = owner_api.get(f"/api/v1/people/{world.bob.pk}/consent-events/").json()
    assert [e["id"] for e in history] == [event.pk]
    assert history[0]["actor"] == "alice"


def test_setting_the_same_consent_again_records_nothing(owner_api, world) -> None:
    response = owner_api.post(f"/api/v1/people/{world.carol.pk}/consent/", {"status": "granted"})

    assert response.status_code == 200
    assert response.json()["event"] is None
    assert ConsentEvent.objects.filter(person=world.carol).count() == 1


@pytest.mark.parametrize(
    "payload", [{}, {"status": "maybe"}, {"status": None}, {"status": "granted", "reason": None}]
)
def test_invalid_consent_change_is_400_and_changes_nothing(owner_api, world, payload) -> None:
    response = owner_api.post(f"/api/v1/people/{world.bob.pk}/consent/", payload)

    assert response.status_code == 400
    world.bob.refresh_from_db()
    assert world.bob.consent_status == ConsentStatus.PENDING
    assert not ConsentEvent.objects.filter(person=world.bob).exists()


def test_agent_cannot_change_consent(agent_api, world) -> None:
    response = agent_api.post(f"/api/v1/people/{world.bob.pk}/consent/", {"status": "granted"})

    assert response.status_code == 403
    assert "change consent" in response.json()["detail"]
    world.bob.refresh_from_db()
    assert world.bob.consent_status == ConsentStatus.PENDING


def test_deleting_a_person_still_in_memories_is_409_and_keeps_them(owner_api, world) -> None:
    response = owner_api.delete(f"/api/v1/people/{world.bob.pk}/")

    assert response.status_code == 409
    assert "Bob is in 1 memory" in response.json()["detail"]
    assert Person.objects.filter(pk=world.bob.pk).exists()


def test_deleting_self_is_400(owner_api, world) -> None:
    me = Person.objects.get(owner=world.alice, is_self=True)

    response = owner_api.delete(f"/api/v1/people/{me.pk}/")

    assert response.status_code == 400
    assert response.json() == {"non_field_errors": ["Your own entry (Self) cannot be deleted."]}


def test_deleting_a_person_in_no_memory_removes_them(owner_api, world) -> None:
    assert owner_api.delete(f"/api/v1/people/{world.loner.pk}/").status_code == 204
    assert not Person.objects.filter(pk=world.loner.pk).exists()


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/people/not-a-uuid/",
        "/api/v1/people/12345/consent/",
        "/api/v1/memories/../../etc/",
        "/api/v1/nothing-here/",
    ],
)
def test_malformed_ids_and_unknown_paths_are_json_404(owner_api, path) -> None:
    response = owner_api.get(path)

    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}


def test_mallory_gets_404_for_alices_person_even_when_writing(mallory_api, world) -> None:
    for response in (
        mallory_api.get(f"/api/v1/people/{world.carol.pk}/"),
        mallory_api.patch(f"/api/v1/people/{world.carol.pk}/", {"notes": "pwned"}),
        mallory_api.post(f"/api/v1/people/{world.carol.pk}/consent/", {"status": "revoked"}),
        mallory_api.delete(f"/api/v1/people/{world.loner.pk}/"),
    ):
        assert response.status_code == 404
    world.carol.refresh_from_db()
    assert (world.carol.notes, world.carol.consent_status) == ("Carol likes tulips", ConsentStatus.GRANTED)
    assert Person.objects.filter(pk=world.loner.pk).exists()
