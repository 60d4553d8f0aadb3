"""Every endpoint, called by every kind of caller.

Callers: Alice's owner token, Alice's agent token (Caregiver), Alice's browser
session, nobody (401), and Mallory's owner token (another owner: 404 for Alice's
objects, and never any of Alice's data).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from agents.models import Agent

CALLERS = ["owner", "session", "agent", "anonymous", "mallory"]
# Words that only appear in Alice's journal: Mallory must never see any of them.
ALICE_ONLY = ["Bob", "Carol", "Dana", "tulips", "diagnosis", "river", "scripts"]
# Hidden from Alice's agents: the memory with Bob (pending), and Bob himself (he has not consented).
HIDDEN_FROM_AGENT = ["diagnosis", "Bob", "Bobby"]


@dataclass(frozen=True)
class Call:
    name: str
    method: str
    url: Callable
    expected: dict[str, int]
    body: Callable | None = None
    query: dict = field(default_factory=dict)


def _expect(owner: int, agent: int, mallory: int, session: int | None = None) -> dict[str, int]:
    return {
        "owner": owner,
        "session": owner if session is None else session,
        "agent": agent,
        "anonymous": 401,
        "mallory": mallory,
    }


def _tutor(w) -> Agent:
    return Agent.objects.get(owner=w.alice, name="Tutor")


CALLS = [
    Call("people list", "get", lambda w: "/api/v1/people/", _expect(200, 200, 200)),
    Call(
        "people create",
        "post",
        lambda w: "/api/v1/people/",
        _expect(201, 403, 201),
        body=lambda w: {"display_name": "Frank"},
    ),
    Call(
        "person retrieve (consented)",
        "get",
        lambda w: f"/api/v1/people/{w.carol.pk}/",
        _expect(200, 200, 404),
    ),
    # Bob has not consented: to an agent he does not exist.
    Call(
        "person retrieve (not consented)",
        "get",
        lambda w: f"/api/v1/people/{w.bob.pk}/",
        _expect(200, 404, 404),
    ),
    Call(
        "person put",
        "put",
        lambda w: f"/api/v1/people/{w.bob.pk}/",
        _expect(200, 403, 404),
        body=lambda w: {"display_name": "Robert"},
    ),
    Call(
        "person patch",
        "patch",
        lambda w: f"/api/v1/people/{w.bob.pk}/",
        _expect(200, 403, 404),
        body=lambda w: {"notes": "new notes"},
    ),
    Call("person delete", "delete", lambda w: f"/api/v1/people/{w.loner.pk}/", _expect(204, 403, 404)),
    Call(
        "person consent",
        "post",
        lambda w: f"/api/v1/people/{w.bob.pk}/consent/",
        _expect(200, 403, 404),
        body=lambda w: {"status": "granted", "reason": "asked in person"},
    ),
    Call(
        "person consent events",
        "get",
        lambda w: f"/api/v1/people/{w.carol.pk}/consent-events/",
        _expect(200, 403, 404),
    ),
    Call("memories list", "get", lambda w: "/api/v1/memories/", _expect(200, 200, 200)),
    Call(
        "memories create",
        "post",
        lambda w: "/api/v1/memories/",
        # Mallory naming Alice's Carol: an unknown person to her, so a 400.
        _expect(201, 403, 400),
        body=lambda w: {"body": "Tea with Carol.", "participants": [{"person": str(w.carol.pk)}]},
    ),
    Call(
        "memory retrieve (consented)",
        "get",
        lambda w: f"/api/v1/memories/{w.memory_with_carol.pk}/",
        _expect(200, 200, 404),
    ),
    Call(
        "memory retrieve (not consented)",
        "get",
        lambda w: f"/api/v1/memories/{w.memory_with_bob.pk}/",
        _expect(200, 404, 404),
    ),
    Call(
        "memory put",
        "put",
        lambda w: f"/api/v1/memories/{w.memory_with_carol.pk}/",
        _expect(200, 403, 404),
        body=lambda w: {"body": "Carol planted more tulips.", "participants": [{"person": str(w.carol.pk)}]},
    ),
    Call(
        "memory patch",
        "patch",
        lambda w: f"/api/v1/memories/{w.memory_with_carol.pk}/",
        _expect(200, 403, 404),
        body=lambda w: {"title": "Spring"},
    ),
    Call(
        "memory delete",
        "delete",
        lambda w: f"/api/v1/memories/{w.memory_with_carol.pk}/",
        _expect(204, 403, 404),
    ),
    Call(
        "memory search",
        "get",
        lambda w: "/api/v1/memories/search/",
        _expect(200, 200, 200),
        query={"q": "diagnosis coffee tulips river"},
    ),
    Call(
        "memory similar (consented)",
        "get",
        lambda w: f"/api/v1/memories/{w.memory_with_carol.pk}/similar/",
        _expect(200, 200, 404),
    ),
    Call(
        "memory similar (not consented)",
        "get",
        lambda w: f"/api/v1/memories/{w.memory_with_bob.pk}/similar/",
        _expect(200, 404, 404),
    ),
    Call("agents list", "get", lambda w: "/api/v1/agents/", _expect(200, 200, 200)),
    Call(
        "agent retrieve (itself)",
        "get",
        lambda w: f"/api/v1/agents/{w.caregiver.pk}/",
        _expect(200, 200, 404),
    ),
    Call(
        "agent retrieve (a sibling)",
        "get",
        lambda w: f"/api/v1/agents/{_tutor(w).pk}/",
        _expect(200, 404, 404),
    ),
    Call("tokens list", "get", lambda w: "/api/v1/tokens/", _expect(403, 403, 403, session=200)),
    Call(
        "tokens create",
        "post",
        lambda w: "/api/v1/tokens/",
        _expect(403, 403, 403, session=201),
        body=lambda w: {"kind": "owner", "name": "laptop"},
    ),
    Call(
        "token revoke",
        "post",
        lambda w: f"/api/v1/tokens/{w.alice.access_tokens.get(name='scripts').pk}/revoke/",
        _expect(403, 403, 403, session=200),
    ),
]


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("call", CALLS, ids=[c.name for c in CALLS])
def test_endpoint_answers_each_caller_as_specified(request, world, call: Call, caller: str) -> None:
    api = request.getfixturevalue(f"{caller}_api")
    url = call.url(world)
    if call.method == "get":
        response = api.get(url, call.query or None)
    elif call.method == "delete":
        response = api.delete(url)
    else:
        response = api.request(call.method, url, call.body(world) if call.body else {})

    assert response.status_code == call.expected[caller], response.content
    if response.status_code != 204:
        assert response["Content-Type"] == "application/json"
    content = response.content.decode()
    if caller == "mallory":
        leaked = [word for word in ALICE_ONLY if word in content]
        assert leaked == [], f"Mallory saw {leaked}: {content}"
    if caller == "agent":
        leaked = [word for word in HIDDEN_FROM_AGENT if word in content]
        assert leaked == [], f"the agent saw {leaked}: {content}"
    if caller == "anonymous":
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert response.json() == {"detail": "Authentication credentials were not provided."}
    if response.status_code == 403:
        expected_reason = "signed-in session" if call.name.startswith("token") else "Agent tokens"
        assert expected_reason in response.json()["detail"]
