from __future__ import annotations

import json

import pytest
from django.urls import reverse

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import AccessLog, Agent, Conversation, Message
from agents.services import chat_turn

pytestmark = pytest.mark.django_db


def _post(client, url: str, data: object, token: str | None = None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(url, data=json.dumps(data), content_type="application/json", headers=headers)


def _url(agent: Agent) -> str:
    return reverse("api-agent-chat", args=[agent.pk])


@pytest.fixture
def owner_token(alice) -> str:
    return access_token_create(owner=alice, kind=TokenKind.OWNER)[1]


@pytest.fixture
def caregiver_token(alice, journal) -> str:
    return access_token_create(owner=alice, kind=TokenKind.AGENT, agent=journal.caregiver)[1]


def test_owner_token_chats_and_gets_reply_conversation_and_citations(client, journal, owner_token, llm_stub):
    response = _post(client, _url(journal.caregiver), {"message": "tulips"}, owner_token)

    assert response.status_code == 200
    body = response.json()
    conversation = Conversation.objects.get()
    assert body["reply"] == "A stub answer [1]."
    assert body["conversation"] == str(conversation.pk)
    assert body["error"] is False
    assert [citation["id"] for citation in body["citations"]] == [str(journal.tulips.pk)]
    assert body["citations"][0]["title"] == "Tulips"
    assert list(AccessLog.objects.values_list("surface", "memory_id")) == [("api", journal.tulips.pk)]


def test_agent_token_chats_with_its_own_agent_and_continues_a_conversation(
    client, journal, caregiver_token, offline
):
    first = _post(client, _url(journal.caregiver), {"message": "tulips"}, caregiver_token).json()
    second = _post(
        client,
        _url(journal.caregiver),
        {"message": "park", "conversation": first["conversation"]},
        caregiver_token,
    )

    assert second.status_code == 200
    assert second.json()["conversation"] == first["conversation"]
    assert Message.objects.filter(conversation_id=first["conversation"]).count() == 4
    assert "not a language model" in second.json()["reply"]


def test_agent_token_for_another_agent_is_404_like_the_agent_detail(client, alice, journal, caregiver_token):
    tutor = Agent.objects.get(owner=alice, name="Tutor")

    response = _post(client, _url(tutor), {"message": "tulips"}, caregiver_token)

    assert response.status_code == 404
    assert (
        client.get(
            reverse("api-agent", args=[tutor.pk]), headers={"Authorization": f"Bearer {caregiver_token}"}
        ).status_code
        == 404
    )
    assert not Message.objects.exists()


def test_another_owners_agent_or_conversation_is_404(client, alice, mallory, journal, offline):
    mallory_token = access_token_create(owner=mallory, kind=TokenKind.OWNER)[1]
    alice_conversation = chat_turn(owner=alice, agent=journal.caregiver, text="tulips").conversation
    mallory_agent = Agent.objects.get(owner=mallory, name="Caregiver")

    assert _post(client, _url(journal.caregiver), {"message": "hi"}, mallory_token).status_code == 404
    response = _post(
        client,
        _url(mallory_agent),
        {"message": "hi", "conversation": str(alice_conversation.pk)},
        mallory_token,
    )
    assert response.status_code == 404
    assert Message.objects.count() == 2


def test_another_agents_conversation_is_404_for_the_owner_too(client, alice, journal, owner_token, offline):
    conversation = chat_turn(owner=alice, agent=journal.caregiver, text="tulips").conversation
    tutor = Agent.objects.get(owner=alice, name="Tutor")

    response = _post(
        client, _url(tutor), {"message": "hi", "conversation": str(conversation.pk)}, owner_token
    )

    assert response.status_code == 404


def test_bad_input_is_a_400_with_field_errors_and_saves_nothing(client, journal, owner_token, offline):
    url = _url(journal.caregiver)

    assert _post(client, url, {}, owner_token).json().keys() == {"message"}
    assert _post(client, url, {"message": "   "}, owner_token).status_code == 400
    assert _post(client, url, {"message": "x" * 4001}, owner_token).status_code == 400
    bad_conversation = _post(client, url, {"message": "hi", "conversation": "nope"}, owner_token)
    assert bad_conversation.status_code == 400
    assert "conversation" in bad_conversation.json()
    assert not Message.objects.exists()


def test_anonymous_chat_is_401(client, journal):
    assert _post(client, _url(journal.caregiver), {"message": "hi"}).status_code == 401


def test_llm_failure_is_reported_in_the_body_with_the_message_saved(client, journal, owner_token, llm_stub):
    llm_stub.status = 503

    body = _post(client, _url(journal.caregiver), {"message": "tulips"}, owner_token).json()

    assert body["error"] is True
    assert "HTTP 503" in body["reply"]
    assert body["citations"] == []
    assert Message.objects.filter(conversation_id=body["conversation"]).count() == 2


def test_chat_operation_is_in_the_openapi_schema(client, alice):
    client.force_login(alice)
    schema = client.get(reverse("api-schema"), {"format": "json"}).json()

    operation = schema["paths"]["/api/v1/agents/{agent_id}/chat/"]["post"]
    assert operation["operationId"] == "agents_chat"
    assert set(operation["responses"]) >= {"200", "400", "404"}
    response_schema = schema["components"]["schemas"]["AgentChatResponse"]
    assert set(response_schema["properties"]) == {"reply", "conversation", "citations", "error", "proposal"}
