"""Sensitive memories and the model (SPEC §3): withheld from every agent unless the owner allows it.

Each agent's clearance is off by default, set by the owner only (its card, its chat page,
PATCH /api/v1/agents/{id}/ with an owner token; never by an agent token), and the gate takes
it as part of the viewer: chat (the prompt at the LLM boundary, a local HTTP stub), the API
with the agent's token and the MCP tools read a consented sensitive memory only when allowed.
"""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import Agent, Message
from agents.services import chat_turn
from memories.services import memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def diagnosis(alice):
    """A sensitive memory with nobody else in it (Self granted: consent is not what withholds it)."""
    return memory_create(
        owner=alice, body="blood test results came back, cholesterol high", sensitivity="sensitive"
    )


@pytest.fixture
def caregiver(alice) -> Agent:
    return Agent.objects.get(owner=alice, name="Caregiver")


def _agent_client(alice, agent: Agent) -> Client:
    _, raw = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=agent)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def test_chat_withholds_sensitive_memories_and_tells_only_the_owner_how_many(
    alice, caregiver, diagnosis, llm_stub
):
    assert caregiver.may_read_sensitive is False  # off by default
    turn = chat_turn(owner=alice, agent=caregiver, text="what did the blood test say?")
    assert turn.memories == []
    assert "cholesterol" not in "\n".join(llm_stub.prompts)
    # The owner's copy says how many were kept back, never which; the prompt never says so.
    assert "1 sensitive memory was kept back" in turn.reply.content
    assert "cholesterol" not in turn.reply.content and "blood" not in turn.reply.content.lower()
    assert "kept back" not in "\n".join(llm_stub.prompts)

    caregiver.may_read_sensitive = True
    caregiver.save()
    turn = chat_turn(owner=alice, agent=caregiver, text="what did the blood test say?")
    assert [memory.pk for memory in turn.memories] == [diagnosis.pk]
    assert "cholesterol" in "\n".join(message["content"] for message in llm_stub.requests[-1]["messages"])
    assert "kept back" not in turn.reply.content


def test_an_agent_asking_for_itself_is_not_told_what_was_kept_back(alice, caregiver, diagnosis, offline):
    turn = chat_turn(owner=alice, agent=caregiver, text="what did the blood test say?", asked_by_agent=True)
    assert turn.memories == [] and "kept back" not in turn.reply.content


def test_api_and_mcp_read_a_sensitive_memory_only_with_the_clearance(alice, caregiver, diagnosis, offline):
    from agents.mcpserver import tools

    client = _agent_client(alice, caregiver)
    token, _ = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=caregiver)

    def reads() -> dict[str, bool]:
        memory_id = str(diagnosis.pk)
        return {
            "list": memory_id in {row["id"] for row in client.get("/api/v1/memories/").json()["results"]},
            "search": memory_id
            in {
                row["memory"]["id"]
                for row in client.get("/api/v1/memories/search/", {"q": "blood test"}).json()["results"]
            },
            "detail": client.get(f"/api/v1/memories/{memory_id}/").status_code == 200,
            "mcp search": memory_id
            in {row["id"] for row in tools.search_memories(token=token, query="blood test")["results"]},
            "mcp timeline": memory_id
            in {
                row["id"]
                for row in tools.timeline_window(token=token, start="2000-01-01", end="2999-12-31")[
                    "memories"
                ]
            },
        }

    assert not any(reads().values())
    Agent.objects.filter(pk=caregiver.pk).update(may_read_sensitive=True)
    token.agent.refresh_from_db()
    assert all(reads().values())


def test_only_the_owner_sets_the_clearance_and_bad_input_is_a_clear_400(alice, caregiver):
    url = f"/api/v1/agents/{caregiver.pk}/"
    # An agent cannot widen what it reads.
    agent_client = _agent_client(alice, caregiver)
    refused = agent_client.patch(url, {"may_read_sensitive": True}, content_type="application/json")
    assert refused.status_code == 403
    _, raw = access_token_create(owner=alice, kind=TokenKind.OWNER)
    owner = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for bad in ({"may_read_sensitive": "yes"}, {"may_read_sensitive": 1}, {}):
        answer = owner.patch(url, bad, content_type="application/json")
        assert answer.status_code == 400
        assert "may_read_sensitive" in answer.json()
    caregiver.refresh_from_db()
    assert caregiver.may_read_sensitive is False
    allowed = owner.patch(url, {"may_read_sensitive": True}, content_type="application/json")
    assert allowed.status_code == 200 and allowed.json()["may_read_sensitive"] is True
    caregiver.refresh_from_db()
    assert caregiver.may_read_sensitive is True


def test_the_agents_page_names_where_sensitive_memories_would_go(
    alice_client, alice, caregiver, mallory, llm_stub, settings
):
    page = alice_client.get("/agents/").content.decode()
    assert "Allow sensitive memories" in page and settings.LLM_BASE_URL in page
    answer = alice_client.post(
        f"/agents/{caregiver.pk}/sensitive/",
        {"may_read_sensitive": "on", "next": f"/agents/{caregiver.pk}/chat/"},
    )
    assert answer.status_code == 302 and answer["Location"] == f"/agents/{caregiver.pk}/chat/"
    caregiver.refresh_from_db()
    assert caregiver.may_read_sensitive is True
    chat = alice_client.get(f"/agents/{caregiver.pk}/chat/").content.decode()
    assert "Stop sending sensitive memories" in chat and settings.LLM_MODEL in chat
    # A redirect elsewhere is not followed; a choice that is neither changes nothing.
    answer = alice_client.post(
        f"/agents/{caregiver.pk}/sensitive/", {"may_read_sensitive": "maybe", "next": "https://evil.example/"}
    )
    assert answer["Location"] == "/agents/"
    caregiver.refresh_from_db()
    assert caregiver.may_read_sensitive is True
    # Someone else's agent does not exist for Mallory.
    alice_client.force_login(mallory)
    assert (
        alice_client.post(f"/agents/{caregiver.pk}/sensitive/", {"may_read_sensitive": "off"}).status_code
        == 404
    )
    caregiver.refresh_from_db()
    assert caregiver.may_read_sensitive is True


def test_the_privacy_audit_names_the_agents_allowed_sensitive_memories(alice, caregiver, diagnosis):
    from memories.gate_explain import memory_privacy_audit

    audit = memory_privacy_audit(memory=diagnosis)
    assert audit.agents.visible is False
    assert any("none is allowed" in reason for reason in audit.agents.reasons)
    Agent.objects.filter(pk=caregiver.pk).update(may_read_sensitive=True)
    audit = memory_privacy_audit(memory=diagnosis)
    assert audit.agents.visible is True
    assert any("Caregiver" in reason for reason in audit.agents.reasons)
    assert not Message.objects.exists()
