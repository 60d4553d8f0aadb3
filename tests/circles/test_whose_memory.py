"""Whose memory it is: a circle's readers (members, its agent, members' agents) are told by name.

Alice's memory with her Self and Carol in it is shared into Family; Bob asks. The
circle's agent must not credit it to Bob ("People: you"), and nobody but Alice
should read a person called "Self": to them, Alice's Self is alice.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.mcpserver import tools
from agents.models import Agent
from agents.prompt import chat_prompt
from agents.services import PRIVACY_INSTRUCTION
from circles.agent import circle_chat_turn, circle_conversation
from circles.services import circle_update, memory_share
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def self_of(user) -> Person:
    return Person.objects.get(owner=user, is_self=True)


@pytest.fixture
def shared(alice, bob, family):
    """Alice's "lantern" memory (Alice herself and Carol in it, told by Carol) and Bob's own, in Family."""
    carol = person_create(owner=alice, display_name="Carol")
    # Both audiences: a members' agent reads Alice's memory only if her agents may, too.
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice, audience=family.audience)
    alices = memory_create(
        owner=alice,
        title="Lantern night",
        body="We lit paper lanterns by the harbor.",
        sensitivity="public",
        participants=[ParticipantSpec(person=self_of(alice)), ParticipantSpec(person=carol)],
        source_person=carol,
    )
    memory_share(memory=alices, circle=family, by=alice)
    bobs = memory_create(
        owner=bob,
        title="Lantern shop",
        body="Bought a lantern at the corner shop.",
        sensitivity="public",
        participants=[ParticipantSpec(person=self_of(bob))],
    )
    memory_share(memory=bobs, circle=family, by=bob)
    return {"alice": alices, "bob": bobs}


def _block(prompt: str, title: str) -> str:
    """The prompt's block for one memory (blocks are separated by a blank line)."""
    return next(block for block in prompt.split("\n\n") if title in block)


def test_circle_prompt_names_each_memorys_owner_never_you_for_another(bob, family, shared, llm_stub):
    conversation = circle_conversation(circle=family, user=bob, private=False)
    circle_chat_turn(conversation=conversation, user=bob, text="Tell me about the lantern")
    prompt = llm_stub.requests[-1]["messages"][0]["content"]
    alices = _block(prompt, "Lantern night")
    assert "Whose: alice's memory" in alices
    assert "People: Carol, alice" in alices and "Told by: Carol" in alices
    assert "you" not in alices.lower()
    assert "Self" not in prompt
    bobs = _block(prompt, "Lantern shop")
    # The asker's own memory may say it is theirs, by name.
    assert "Whose: bob's memory (the member asking)" in bobs and "People: bob" in bobs
    assert "bob is asking" in prompt


def test_private_circle_chat_names_the_owner_too(alice, bob, family, shared, llm_stub):
    conversation = circle_conversation(circle=family, user=alice, private=True)
    circle_chat_turn(conversation=conversation, user=alice, text="lantern")
    prompt = llm_stub.requests[-1]["messages"][0]["content"]
    assert "Whose: alice's memory (the member asking)" in _block(prompt, "Lantern night")
    assert "Whose: bob's memory\n" in _block(prompt, "Lantern shop") + "\n"
    assert "People: you" not in prompt and "Self" not in prompt


def test_offline_circle_reply_says_whose_memory_each_is(bob, family, shared, offline):
    conversation = circle_conversation(circle=family, user=bob, private=False)
    reply = circle_chat_turn(conversation=conversation, user=bob, text="lantern")
    lines = reply.content.splitlines()
    alices = next(line for line in lines if "Lantern night" in line).rsplit("(", 1)[1]
    assert alices == "alice's memory; with Carol, alice; told by Carol)"
    bobs = next(line for line in lines if "Lantern shop" in line).rsplit("(", 1)[1]
    assert bobs == "bob's memory; with bob)"
    assert "Self" not in reply.content


def test_owner_chat_prompt_still_says_you_for_the_owner(alice, shared):
    # The owner's own agent: "you" is the owner, and that is right.
    agent = Agent.objects.get(owner=alice, name="Caregiver")
    messages = chat_prompt(
        agent=agent,
        privacy_instruction=PRIVACY_INSTRUCTION,
        memories=[shared["alice"]],
        earlier_questions=[],
        question="lantern",
    )
    system = messages[0]["content"]
    people = _block(system, "Lantern night").split("People: ")[1].split("\n")[0]
    assert sorted(people.split(", ")) == ["Carol", "you"]
    assert "Whose:" not in system


@pytest.mark.parametrize("htmx", [False, True])
def test_pages_show_another_members_self_as_that_member(client, bob, family, shared, htmx):
    client.force_login(bob)
    for url in (f"/circles/{family.pk}/", f"/circles/{family.pk}/memories/{shared['alice'].pk}/"):
        page = client.get(url, **(HX if htmx else {})).content.decode()
        assert "Lantern night" in page
        assert ">Self<" not in page
        assert '<span class="chip">alice<span class="chip-role">' in page


def test_api_shows_another_members_self_as_that_member(bob, family, shared):
    _, token = access_token_create(owner=bob, kind=TokenKind.OWNER)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    listed = client.get(f"/api/v1/circles/{family.pk}/memories/").json()["results"]
    searched = client.get(f"/api/v1/circles/{family.pk}/memories/", {"q": "lantern"}).json()["results"]
    detail = client.get(f"/api/v1/circles/{family.pk}/memories/{shared['alice'].pk}/").json()
    for item in [*listed, *searched, detail]:
        if item["id"] == str(shared["alice"].pk):
            assert item["owner"] == "alice"
            assert sorted(person["name"] for person in item["people"]) == ["Carol", "alice"]
            assert item["told_by"] == "Carol"
    assert any(item["id"] == str(shared["alice"].pk) for item in listed)
    assert any(item["id"] == str(shared["alice"].pk) for item in searched)


def test_mcp_circle_tools_show_another_members_self_as_that_member(alice, bob, family, shared):
    circle_update(circle=family, by=alice, agents_may_read=True)
    token, _ = access_token_create(
        owner=bob, kind=TokenKind.AGENT, agent=Agent.objects.get(owner=bob, name="Caregiver")
    )
    today = timezone.now().date().isoformat()
    found = tools.search_memories(token=token, query="lantern", circle=str(family.pk))["results"]
    window = tools.timeline_window(token=token, start="2000-01-01", end=today, circle=str(family.pk))
    alices = [item for item in [*found, *window["memories"]] if item["id"] == str(shared["alice"].pk)]
    assert len(alices) == 2
    for item in alices:
        assert sorted(person["name"] for person in item["people"]) == ["Carol", "alice"]
        assert item["told_by"] == "Carol"
