from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.test import Client

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import Agent
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent


class ApiClient:
    """A Django test client speaking JSON, optionally with a bearer token."""

    def __init__(self, client: Client, token: str | None = None) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def request(self, method: str, url: str, data: object = None):
        kwargs: dict = {"headers": self.headers}
        if data is not None:
            if method == "get":
                kwargs["data"] = data
            else:
                kwargs["data"] = json.dumps(data)
                kwargs["content_type"] = "application/json"
        return getattr(self.client, method)(url, **kwargs)

    def get(self, url: str, data: object = None):
        return self.request("get", url, data)

    def post(self, url: str, data: object = None):
        return self.request("post", url, data if data is not None else {})

    def put(self, url: str, data: object = None):
        return self.request("put", url, data)

    def patch(self, url: str, data: object = None):
        return self.request("patch", url, data)

    def delete(self, url: str):
        return self.request("delete", url)


@dataclass
class World:
    """Alice's journal: Bob has not consented, Carol has, Dana is in no memory.

    Mallory is a stranger with her own journal and her own owner token.
    """

    alice: object
    mallory: object
    bob: Person
    carol: Person
    caregiver: Agent
    memory_with_bob: Memory
    memory_with_carol: Memory
    memory_alone: Memory
    loner: Person
    mallory_person: Person
    mallory_memory: Memory
    owner_token: str
    agent_token: str
    mallory_token: str


@pytest.fixture
def world(alice, mallory) -> World:
    bob = person_create(owner=alice, display_name="Bob", aliases=["Bobby"], notes="Bob's private notes")
    carol = person_create(owner=alice, display_name="Carol", aliases=["Caz"], notes="Carol likes tulips")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")
    memory_with_bob = memory_create(
        owner=alice,
        title="Bob's diagnosis",
        body="Bob told me about his diagnosis over coffee.",
        participants=[ParticipantSpec(person=bob)],
    )
    memory_with_carol = memory_create(
        owner=alice,
        title="Tulips",
        body="Carol planted tulips in the garden.",
        participants=[ParticipantSpec(person=carol, role="present")],
    )
    memory_alone = memory_create(owner=alice, body="I walked by the river alone at dawn.")
    mallory_person = person_create(owner=mallory, display_name="Eve")
    mallory_memory = memory_create(
        owner=mallory, body="Mallory's secret plan.", participants=[ParticipantSpec(person=mallory_person)]
    )
    _, owner_token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="scripts")
    _, agent_token = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=caregiver)
    _, mallory_token = access_token_create(owner=mallory, kind=TokenKind.OWNER)
    return World(
        alice=alice,
        mallory=mallory,
        bob=bob,
        carol=carol,
        caregiver=caregiver,
        memory_with_bob=memory_with_bob,
        memory_with_carol=memory_with_carol,
        memory_alone=memory_alone,
        loner=person_create(owner=alice, display_name="Dana"),
        mallory_person=mallory_person,
        mallory_memory=mallory_memory,
        owner_token=owner_token,
        agent_token=agent_token,
        mallory_token=mallory_token,
    )


@pytest.fixture
def owner_api(world: World) -> ApiClient:
    return ApiClient(Client(), world.owner_token)


@pytest.fixture
def agent_api(world: World) -> ApiClient:
    return ApiClient(Client(), world.agent_token)


@pytest.fixture
def mallory_api(world: World) -> ApiClient:
    return ApiClient(Client(), world.mallory_token)


@pytest.fixture
def session_api(world: World) -> ApiClient:
    client = Client()
    client.force_login(world.alice)
    return ApiClient(client)


@pytest.fixture
def anonymous_api(world: World) -> ApiClient:
    return ApiClient(Client())
