"""MCP tools take exactly their declared arguments, of exactly their types (issue #40, item 4).

As the REST API: a boolean is not a number, text is not a number, and an argument the tool
does not have is refused with a message that names it, never silently dropped.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import AccessLog, Agent
from memories.services import memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_token(alice) -> str:
    memory_create(owner=alice, body="Tulips by the gate.")
    agent = Agent.objects.get(owner=alice, name="Caregiver")
    return access_token_create(owner=alice, kind=TokenKind.AGENT, agent=agent)[1]


def _post(token: str, message: dict[str, Any]) -> dict[str, Any]:
    response = Client().post(
        "/mcp/",
        json.dumps(message),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 200, response.content[:300]
    return response.json()


def _call(token: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """(refused, the answer's text) of one tools/call."""
    answer = _post(
        token,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    )
    result = answer["result"]
    text = " ".join(part.get("text", "") for part in result.get("content", []))
    return bool(result.get("isError")), text


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"query": "tulips", "limit": True}, "limit must be a whole number, not true (a boolean)"),
        ({"query": "tulips", "limit": False}, "limit must be a whole number, not false (a boolean)"),
        ({"query": "tulips", "limit": "10"}, 'limit must be a whole number, not "10" (text)'),
        ({"query": "tulips", "limit": 10.0}, "limit must be a whole number, not 10.0 (a number)"),
        ({"query": 12345}, "query must be text, not 12345 (a number)"),
        ({"query": True}, "query must be text, not true (a boolean)"),
        ({"query": ["tulips"]}, "query must be text"),
        ({"query": "tulips", "circle": 7}, "circle must be text, not 7 (a number)"),
    ],
)
def test_search_memories_refuses_a_value_of_the_wrong_type(agent_token, arguments, words):
    refused, text = _call(agent_token, "search_memories", arguments)
    assert refused
    assert words in text
    assert not AccessLog.objects.exists()  # nothing was read


def test_an_unknown_argument_is_refused_by_name(agent_token):
    refused, text = _call(agent_token, "search_memories", {"query": "tulips", "lmit": 3})
    assert refused
    assert "Unknown argument for search_memories: 'lmit'" in text
    assert "It takes: query, limit, circle." in text
    refused, text = _call(agent_token, "get_person", {"name": "Carol", "since": "2024", "role": "x"})
    assert refused
    assert "Unknown arguments for get_person: 'role', 'since'" in text


def test_a_missing_argument_is_named(agent_token):
    refused, text = _call(agent_token, "timeline_window", {"start": "2024-01-01"})
    assert refused
    assert "Missing argument for timeline_window: end" in text


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (
            {"text": "Water the tulips", "from_memories": [1, 2]},
            "from_memories must be a list of text or null",
        ),
        (
            {"text": "Water the tulips", "from_memories": "abc"},
            "from_memories must be a list of text or null",
        ),
        ({"text": 1}, "text must be text, not 1 (a number)"),
    ],
)
def test_memory_propose_refuses_wrong_types(agent_token, arguments, words):
    refused, text = _call(agent_token, "memory_propose", arguments)
    assert refused
    assert words in text


def test_right_arguments_still_work(agent_token):
    refused, text = _call(agent_token, "search_memories", {"query": "tulips", "limit": 5, "circle": ""})
    assert not refused, text
    assert "Tulips by the gate." in text
    refused, text = _call(agent_token, "memory_propose", {"text": "Water the tulips", "from_memories": None})
    assert not refused, text


def test_the_published_schemas_allow_no_other_arguments(agent_token):
    answer = _post(agent_token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    tools = answer["result"]["tools"]
    assert len(tools) == 6
    for tool in tools:
        assert tool["inputSchema"]["additionalProperties"] is False, tool["name"]
