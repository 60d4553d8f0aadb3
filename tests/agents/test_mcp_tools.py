"""The MCP tools' privacy property, across generated journals (transport-free).

For random people (granted, pending or revoked) and memories involving random
subsets of them, every tool must hand out exactly what a small, independent
statement of the policy allows, log exactly what it handed out, and answer for a
person who has not consented exactly as for someone who does not exist. The transports are
tested in test_mcp.py; here the tool code is called directly so that many worlds
fit in one test.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounts.models import TokenKind
from accounts.services import access_token_authenticate, access_token_create, user_signup
from agents.mcpserver import tools
from agents.models import AccessLog, AccessSurface
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent
from tests.agents.roles import AGENT_ROLES, PER_ROLE_EXAMPLES, agent_with_role

STATUSES = [ConsentStatus.GRANTED, ConsentStatus.PENDING, ConsentStatus.REVOKED]
START = datetime(2024, 1, 1, 12, tzinfo=UTC)

worlds = st.fixed_dictionaries(
    {
        "people": st.lists(st.sampled_from(STATUSES), min_size=1, max_size=5),
        "memories": st.lists(
            st.fixed_dictionaries(
                {
                    "people": st.sets(st.integers(min_value=0, max_value=4), max_size=3),
                    "source": st.none() | st.integers(min_value=0, max_value=4),
                    "day": st.integers(min_value=0, max_value=30),
                }
            ),
            max_size=8,
        ),
    }
)


def _may_agents_see(memory: dict, statuses: list[str]) -> bool:
    """The policy, stated independently: everyone in it, and whoever told it, has granted."""
    involved = set(memory["people"]) | ({memory["source"]} if memory["source"] is not None else set())
    return all(statuses[index] == ConsentStatus.GRANTED for index in involved)


def _build(world: dict, agent_role: str):
    owner = user_signup(username=f"owner-{uuid.uuid4().hex[:12]}", password="correct horse battery")
    people = []
    for index, status in enumerate(world["people"]):
        person = person_create(owner=owner, display_name=f"Person{index} Zq", aliases=[f"alias{index}"])
        if status != ConsentStatus.PENDING:
            person_set_consent(person=person, status=ConsentStatus.GRANTED, actor=owner)
        if status == ConsentStatus.REVOKED:
            person_set_consent(person=person, status=ConsentStatus.REVOKED, actor=owner)
        people.append(person)
    statuses = world["people"]
    memories = []
    for number, spec in enumerate(world["memories"]):
        # Indexes past the generated people are dropped, so every world is valid.
        spec = {
            "people": {index for index in spec["people"] if index < len(people)},
            "source": spec["source"] if spec["source"] is not None and spec["source"] < len(people) else None,
            "day": spec["day"],
        }
        memory = memory_create(
            owner=owner,
            title=f"Memory {number}",
            body=f"Quokka story number {number}.",
            occurred_at=START + timedelta(days=spec["day"]),
            kind="knowledge",
            source_person=people[spec["source"]] if spec["source"] is not None else None,
            participants=[ParticipantSpec(person=people[index]) for index in sorted(spec["people"])],
        )
        memories.append((memory, spec))
    agent = agent_with_role(owner=owner, role=agent_role)
    _token, raw_token = access_token_create(owner=owner, kind=TokenKind.AGENT, agent=agent)
    token = access_token_authenticate(raw_token=raw_token)
    visible = {str(memory.pk) for memory, spec in memories if _may_agents_see(spec, statuses)}
    return owner, people, statuses, memories, token, visible


def _logged(owner, agent) -> list[str]:
    rows = AccessLog.objects.filter(owner=owner)
    assert all(row.surface == AccessSurface.MCP and row.agent_id == agent.pk for row in rows)
    return sorted(str(row.memory_id) for row in rows)


@pytest.mark.django_db
@pytest.mark.parametrize("agent_role", AGENT_ROLES)
@settings(max_examples=PER_ROLE_EXAMPLES)
@given(world=worlds)
def test_every_tool_hands_out_exactly_what_the_policy_allows(agent_role, world):
    owner, people, statuses, memories, token, visible = _build(world, agent_role)
    handed_out: list[str] = []

    found = tools.search_memories(token=token, query="quokka story", limit=100)
    assert {result["id"] for result in found["results"]} == visible
    handed_out += [result["id"] for result in found["results"]]

    window = tools.timeline_window(token=token, start="2024-01-01", end="2024-12-31", limit=100)
    assert {memory["id"] for memory in window["memories"]} == visible
    days = [memory["occurred_at"] for memory in window["memories"]]
    assert days == sorted(days)
    handed_out += [memory["id"] for memory in window["memories"]]

    for index, person in enumerate(people):
        if statuses[index] != ConsentStatus.GRANTED:
            # Someone who has not consented is answered like no one at all.
            hidden_name, unknown_name = f"ALIAS{index}", f"ALIAS{index + len(people)}"
            with pytest.raises(tools.ToolInputError) as hidden:
                tools.get_person(token=token, name=hidden_name)
            with pytest.raises(tools.ToolInputError) as nobody:
                tools.get_person(token=token, name=unknown_name)
            answer = str(hidden.value).replace(hidden_name, "NAME")
            assert answer == str(nobody.value).replace(unknown_name, "NAME")
            assert person.display_name not in answer
            continue
        (shown,) = tools.get_person(token=token, name=f"ALIAS{index}")["people"]
        expected = {
            str(memory.pk)
            for memory, spec in memories
            if index in spec["people"] and str(memory.pk) in visible
        }
        assert {memory["id"] for memory in shown["memories"]} == expected
        assert shown["memory_count"] == len(expected)
        handed_out += [memory["id"] for memory in shown["memories"]]

    for memory, _spec in memories:
        if str(memory.pk) in visible:
            audit = tools.privacy_audit(token=token, memory_id=str(memory.pk))
            assert all(p["consent"] == ConsentStatus.GRANTED for p in audit["participants"])
            handed_out.append(str(memory.pk))
        else:
            with pytest.raises(tools.ToolInputError, match="^Memory not found.$"):
                tools.privacy_audit(token=token, memory_id=str(memory.pk))

    # Names of people who have not consented never appear in anything a tool returned.
    everything = json.dumps([found, window])
    for index, person in enumerate(people):
        if statuses[index] != ConsentStatus.GRANTED:
            assert person.display_name not in everything
    assert _logged(owner, token.agent) == sorted(handed_out)
