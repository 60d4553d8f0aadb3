"""Agent-to-agent (A4S): a member's agent reads what that member may see in a circle, when allowed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import AccessLog, Agent
from circles.services import circle_update, membership_remove, memory_share
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db


def agent_client(user) -> tuple[Client, Agent]:
    agent = Agent.objects.get(owner=user, name="Caregiver")
    _, token = access_token_create(owner=user, kind=TokenKind.AGENT, agent=agent)
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}"), agent


@pytest.fixture
def shared(alice, family):
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice, audience=family.audience)
    made = {}
    for key, body in [
        ("open", "picnic by the lake"),
        ("expired", "old picnic"),
        ("private", "a private note"),
    ]:
        memory = memory_create(
            owner=alice,
            body=body,
            sensitivity="personal" if key == "private" else "public",
            participants=[ParticipantSpec(person=carol)],
        )
        memory_share(memory=memory, circle=family, by=alice)
        made[key] = memory
    Memory.objects.filter(pk=made["expired"].pk).update(expires_at=timezone.now() - timedelta(days=1))
    return made


def test_off_by_default_the_agent_gets_404(alice, bob, family, shared):
    client, _ = agent_client(bob)
    assert client.get(f"/api/v1/circles/{family.pk}/memories/").status_code == 404
    assert client.get(f"/api/v1/circles/{family.pk}/memories/{shared['open'].pk}/").status_code == 404


def test_when_allowed_the_agent_reads_what_its_member_may_see_logged_a2a(alice, bob, family, shared):
    circle_update(circle=family, by=alice, agents_may_read=True)
    client, agent = agent_client(bob)
    listed = client.get(f"/api/v1/circles/{family.pk}/memories/").json()
    # Not the personal one (not about Bob), not the expired one (agents never see expired).
    assert [item["id"] for item in listed["results"]] == [str(shared["open"].pk)]
    assert client.get(f"/api/v1/circles/{family.pk}/memories/{shared['expired'].pk}/").status_code == 404
    detail = client.get(f"/api/v1/circles/{family.pk}/memories/{shared['open'].pk}/")
    assert detail.status_code == 200
    logged = AccessLog.objects.filter(memory=shared["open"], surface="a2a")
    assert logged.count() == 2 and {entry.agent_id for entry in logged} == {agent.pk}
    assert {entry.viewer_id for entry in logged} == {bob.pk}


def test_the_agent_never_writes_and_sees_nothing_else_of_circles(alice, bob, family, shared):
    circle_update(circle=family, by=alice, agents_may_read=True)
    client, _ = agent_client(bob)
    assert client.get(f"/api/v1/circles/{family.pk}/").status_code == 404
    assert client.get(f"/api/v1/circles/{family.pk}/members/").status_code == 404
    assert (
        client.post(f"/api/v1/memories/{shared['open'].pk}/shares/", {"circle": str(family.pk)}).status_code
        == 404
    )
    assert client.post("/api/v1/circles/", {"name": "x"}, content_type="application/json").status_code == 404


def test_switching_off_or_leaving_takes_effect_on_the_next_call(alice, bob, family, shared):
    circle_update(circle=family, by=alice, agents_may_read=True)
    client, _ = agent_client(bob)
    assert client.get(f"/api/v1/circles/{family.pk}/memories/").status_code == 200
    circle_update(circle=family, by=alice, agents_may_read=False)
    assert client.get(f"/api/v1/circles/{family.pk}/memories/").status_code == 404
    circle_update(circle=family, by=alice, agents_may_read=True)
    membership_remove(circle=family, user_id=bob.pk, by=bob)
    assert client.get(f"/api/v1/circles/{family.pk}/memories/").status_code == 404


def test_revoked_consent_hides_it_from_the_agent_on_the_next_call(alice, bob, family, shared):
    circle_update(circle=family, by=alice, agents_may_read=True)
    client, _ = agent_client(bob)
    carol = shared["open"].participants.get().person
    person_set_consent(person=carol, status=ConsentStatus.REVOKED, actor=alice, audience=family.audience)
    assert client.get(f"/api/v1/circles/{family.pk}/memories/?q=picnic").json()["results"] == []


def test_only_the_owner_turns_it_on_from_the_chat_page(client, alice, bob, family):
    client.force_login(bob)
    assert (
        client.post(
            f"/circles/{family.pk}/chat/agent/", {"role": "caregiver", "agents_may_read": "on"}
        ).status_code
        == 404
    )
    family.refresh_from_db()
    assert family.agents_may_read is False
    client.force_login(alice)
    client.post(f"/circles/{family.pk}/chat/agent/", {"role": "caregiver", "agents_may_read": "on"})
    family.refresh_from_db()
    assert family.agents_may_read is True


# --- the same through the MCP tools (search_memories and timeline_window with `circle`) ---------


def _mcp_token(user):
    agent = Agent.objects.get(owner=user, name="Caregiver")
    token, _ = access_token_create(owner=user, kind=TokenKind.AGENT, agent=agent)
    return token


def test_mcp_tools_read_a_circle_only_when_allowed(alice, bob, family, shared):
    from agents.mcpserver import tools

    token = _mcp_token(bob)
    today = timezone.now().date().isoformat()
    for call in (
        lambda: tools.search_memories(token=token, query="picnic", circle=str(family.pk)),
        lambda: tools.timeline_window(token=token, start="2000-01-01", end=today, circle=str(family.pk)),
    ):
        with pytest.raises(tools.ToolInputError) as refused:
            call()
        # The same words as for a circle that does not exist.
        with pytest.raises(tools.ToolInputError) as unknown:
            tools.search_memories(token=token, query="picnic", circle="00000000-0000-0000-0000-000000000000")
        assert str(refused.value).replace(str(family.pk), "X") == str(unknown.value).replace(
            "00000000-0000-0000-0000-000000000000", "X"
        )
    circle_update(circle=family, by=alice, agents_may_read=True)
    found = tools.search_memories(token=token, query="picnic", circle=str(family.pk))
    assert [item["id"] for item in found["results"]] == [str(shared["open"].pk)]
    assert found["results"][0]["owner"] == "alice"
    window = tools.timeline_window(token=token, start="2000-01-01", end=today, circle=str(family.pk))
    assert [item["id"] for item in window["memories"]] == [str(shared["open"].pk)]
    assert AccessLog.objects.filter(surface="a2a", memory=shared["open"]).count() == 2
    # Without `circle` the tools still read only Bob's own journal: Alice's memory is not there.
    assert tools.search_memories(token=token, query="picnic")["results"] == []
    membership_remove(circle=family, user_id=bob.pk, by=bob)
    with pytest.raises(tools.ToolInputError):
        tools.search_memories(token=token, query="picnic", circle=str(family.pk))
