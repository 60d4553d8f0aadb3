"""Agent and owner bearer tokens, the API and MCP work unchanged when the owner has two factors.

A token is its own credential (256 random bits, made from a signed-in session with both
factors): it is never asked for a second factor, and no session rule touches it.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from accounts.models import SignedInSession, TokenKind
from accounts.services import access_token_create
from agents.models import Agent
from memories.services import memory_create
from tests.accounts.two_factor_helpers import enrol

pytestmark = pytest.mark.django_db


@pytest.fixture
def tokens(alice):
    enrol(alice)
    memory_create(owner=alice, title="River walk", body="Walked by the river with the dog.")
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")
    _owner, owner_token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="script")
    _agent, agent_token = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=caregiver, name="mcp")
    return owner_token, agent_token


def test_an_owner_token_reads_and_writes_the_api_with_two_factor_on(alice, tokens):
    owner_token, _agent_token = tokens
    api = Client(headers={"Authorization": f"Bearer {owner_token}"})
    listed = api.get("/api/v1/memories/")
    assert listed.status_code == 200
    assert "River walk" in listed.content.decode()
    created = api.post(
        "/api/v1/memories/", data=json.dumps({"body": "Tea with Carol."}), content_type="application/json"
    )
    assert created.status_code == 201
    # A token request is not a browser: nothing lands on the Sessions page.
    assert not SignedInSession.objects.filter(owner=alice).exists()
    assert "sessionid" not in api.cookies


def test_an_agent_token_searches_consent_gated_with_two_factor_on(tokens):
    _owner_token, agent_token = tokens
    api = Client(headers={"Authorization": f"Bearer {agent_token}"})
    response = api.get("/api/v1/memories/search/", {"q": "river"})
    assert response.status_code == 200
    assert response.json()["consent_gated"] is True


def test_mcp_answers_an_agent_token_with_two_factor_on(tokens):
    _owner_token, agent_token = tokens
    mcp = Client(
        headers={"Authorization": f"Bearer {agent_token}", "Accept": "application/json, text/event-stream"}
    )
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search_memories", "arguments": {"query": "river"}},
    }
    response = mcp.post("/mcp/", data=json.dumps(call), content_type="application/json")
    assert response.status_code == 200
    body = response.content.decode()
    assert '"error"' not in body.split('"result"', 1)[0]
    assert "River walk" in body
