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


# --- no agent is the owner (SPEC §3): the owner's own agent reading through a circle ----------


@pytest.fixture
def eves_memory(alice, bob, family):
    """Alice's memory with Eve in it, shared into Family; Eve granted both audiences; A2A on."""
    eve = person_create(owner=alice, display_name="Eve")
    for audience in ("agents", family.audience):
        person_set_consent(person=eve, status=ConsentStatus.GRANTED, actor=alice, audience=audience)
    memory = memory_create(
        owner=alice,
        body="orchard walk with Eve",
        sensitivity="public",
        participants=[ParticipantSpec(person=eve)],
    )
    memory_share(memory=memory, circle=family, by=alice)
    circle_update(circle=family, by=alice, agents_may_read=True)
    return eve, memory


def _everything_alices_agent_reads(alice, family) -> dict[str, bool]:
    """Whether the memory reaches Alice's own agent by each circle route (API list, search,
    detail; MCP search and timeline)."""
    from agents.mcpserver import tools

    client, _ = agent_client(alice)
    token = _mcp_token(alice)
    base = f"/api/v1/circles/{family.pk}/memories/"
    memory_id = str(Memory.objects.get(body="orchard walk with Eve").pk)
    today = timezone.now().date().isoformat()
    listed = client.get(base).json()["results"]
    searched = client.get(base, {"q": "orchard walk"}).json()["results"]
    return {
        "api list": memory_id in {row["id"] for row in listed},
        "api search": memory_id in {row["id"] for row in searched},
        "api detail": client.get(f"{base}{memory_id}/").status_code == 200,
        "mcp search": memory_id
        in {
            row["id"]
            for row in tools.search_memories(token=token, query="orchard walk", circle=str(family.pk))[
                "results"
            ]
        },
        "mcp timeline": memory_id
        in {
            row["id"]
            for row in tools.timeline_window(
                token=token, start="2000-01-01", end=today, circle=str(family.pk)
            )["memories"]
        },
    }


def test_the_owners_agent_reads_their_memory_in_a_circle_only_as_their_agents_may(
    alice, bob, family, eves_memory
):
    eve, _ = eves_memory
    assert all(_everything_alices_agent_reads(alice, family).values())
    # Eve revokes Alice's agents: the circle is no back door for them, by any route.
    person_set_consent(person=eve, status=ConsentStatus.REVOKED, actor=alice)
    assert not any(_everything_alices_agent_reads(alice, family).values())
    # Granted again for agents, revoked for the circle: hidden too (both rules hold).
    person_set_consent(person=eve, status=ConsentStatus.GRANTED, actor=alice)
    person_set_consent(person=eve, status=ConsentStatus.REVOKED, actor=alice, audience=family.audience)
    assert not any(_everything_alices_agent_reads(alice, family).values())
    # Alice herself still reads her memory in the circle (the owner's shortcut is a person's).
    client = Client()
    client.force_login(alice)
    memory_id = Memory.objects.get(body="orchard walk with Eve").pk
    assert client.get(f"/api/v1/circles/{family.pk}/memories/{memory_id}/").status_code == 200


def test_a_sensitive_memory_reaches_an_agent_through_a_circle_only_with_its_clearance(
    alice, bob, family, eves_memory
):
    _, memory = eves_memory
    Memory.objects.filter(pk=memory.pk).update(sensitivity="sensitive")
    assert not any(_everything_alices_agent_reads(alice, family).values())
    Agent.objects.filter(owner=alice, name="Caregiver").update(may_read_sensitive=True)
    assert all(_everything_alices_agent_reads(alice, family).values())
