"""The Universe: the owner's graph of memories and people, capped, filtered, gated memories marked."""

from __future__ import annotations

import datetime

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import EdgeKind, Memory, MemoryEdge
from memories.services import ParticipantSpec, memory_create
from memories.universe import MAX_LIMIT
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db


def _when(year: int, month: int = 6, day: int = 1) -> datetime.datetime:
    return timezone.make_aware(datetime.datetime(year, month, day, 12))


@pytest.fixture
def world(alice):
    bob = person_create(owner=alice, display_name="Bob")  # never consented
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    chess = memory_create(
        owner=alice,
        title="Chess",
        body="Bob taught me chess.",
        occurred_at=_when(2020),
        participants=[ParticipantSpec(person=bob)],
    )
    tulips = memory_create(
        owner=alice,
        title="Tulips",
        body="Carol planted tulips.",
        occurred_at=_when(2022),
        participants=[ParticipantSpec(person=carol)],
    )
    garden = memory_create(
        owner=alice,
        title="Garden",
        body="Carol and I dug the garden.",
        occurred_at=_when(2023),
        participants=[ParticipantSpec(person=carol)],
    )
    MemoryEdge.objects.create(owner=alice, source=tulips, target=garden, kind=EdgeKind.SIMILAR, weight=0.8)
    MemoryEdge.objects.create(owner=alice, source=garden, target=tulips, kind=EdgeKind.SIMILAR, weight=0.8)
    return {"bob": bob, "carol": carol, "chess": chess, "tulips": tulips, "garden": garden}


def graph(client, **params) -> dict:
    response = client.get(reverse("universe_graph"), params)
    assert response.status_code == 200, response.content
    return response.json()


def nodes(data: dict, kind: str) -> dict[str, dict]:
    return {node["label"]: node for node in data["nodes"] if node["type"] == kind}


def test_graph_has_memories_people_and_links_with_gated_memories_marked(alice_client, world):
    data = graph(alice_client)
    memories = nodes(data, "memory")
    assert set(memories) == {"Chess", "Tulips", "Garden"}
    assert memories["Chess"]["gated"] is True  # Bob has not consented
    assert memories["Tulips"]["gated"] is False
    assert memories["Chess"]["url"] == reverse("memory_detail", args=[world["chess"].pk])
    people = nodes(data, "person")
    assert set(people) == {"Bob", "Carol"}  # Self is no node
    assert people["Carol"]["count"] == 2
    assert people["Bob"]["url"] == reverse("person_detail", args=[world["bob"].pk])
    similar = [link for link in data["links"] if link["kind"] == "similar"]
    assert len(similar) == 1  # stored both ways, drawn once
    assert {similar[0]["source"], similar[0]["target"]} == {
        f"m-{world['tulips'].pk}",
        f"m-{world['garden'].pk}",
    }
    assert {"source": f"p-{world['bob'].pk}", "target": f"m-{world['chess'].pk}", "kind": "person"} in data[
        "links"
    ]
    assert data["gated"] == 1


def test_a_revoked_consent_marks_the_memory_at_once(alice_client, alice, world):
    person_set_consent(person=world["carol"], status=ConsentStatus.REVOKED, actor=alice)
    memories = nodes(graph(alice_client), "memory")
    assert memories["Tulips"]["gated"] is True and memories["Garden"]["gated"] is True


def test_filter_by_person_and_by_time(alice_client, world):
    by_carol = nodes(graph(alice_client, person=world["carol"].pk), "memory")
    assert set(by_carol) == {"Tulips", "Garden"}
    in_2022 = graph(alice_client, since="2022-01-01", until="2022-12-31")
    assert set(nodes(in_2022, "memory")) == {"Tulips"}
    assert set(nodes(in_2022, "person")) == {"Carol"}


def test_the_cap_says_how_many_there_are(alice_client, world):
    data = graph(alice_client, limit=2)
    assert (data["shown"], data["total"]) == (2, 3)
    assert set(nodes(data, "memory")) == {"Tulips", "Garden"}  # the newest
    page = alice_client.get(reverse("universe"), {"limit": 2}).content.decode()
    assert "Showing the 2 most recent of 3 memories" in page


def test_limits_and_bad_filters_are_refused(alice_client, world):
    url = reverse("universe_graph")
    assert alice_client.get(url, {"limit": MAX_LIMIT + 1}).status_code == 400
    assert alice_client.get(url, {"limit": 0}).status_code == 400
    assert alice_client.get(url, {"since": "not a date"}).status_code == 400
    assert alice_client.get(url, {"since": "2023-01-01", "until": "2020-01-01"}).status_code == 400
    assert alice_client.get(reverse("universe"), {"since": "nope"}).status_code == 400


def test_only_the_owner_sees_it(client, alice_client, mallory, world):
    mallory_bob = person_create(owner=mallory, display_name="Mallory's Bob")
    memory_create(owner=mallory, title="Mallory's day", body="Mine.")
    # Someone else's person is not a choice: refused, not shown.
    assert alice_client.get(reverse("universe_graph"), {"person": mallory_bob.pk}).status_code == 400
    assert "Mallory's day" not in {node["label"] for node in graph(alice_client)["nodes"]}
    alice_client.force_login(mallory)
    mine = graph(alice_client)
    assert {node["label"] for node in mine["nodes"]} == {"Mallory's day"}
    assert alice_client.get(reverse("universe_graph"), {"person": world["bob"].pk}).status_code == 400
    client.logout()
    assert client.get(reverse("universe")).status_code == 302
    assert client.get(reverse("universe_graph")).status_code == 302


def test_page_lists_the_same_nodes_and_links_from_the_header(alice_client, world):
    page = alice_client.get(reverse("universe")).content.decode()
    assert 'id="universe-graph"' in page
    assert reverse("memory_detail", args=[world["chess"].pk]) in page
    assert "Agents cannot see" in page
    assert f'href="{reverse("universe")}"' in page  # the header link
    assert "vendor/cytoscape.min.js" in page
    assert Memory.objects.filter(owner__username="alice").count() == 3
