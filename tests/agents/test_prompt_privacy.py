"""Across generated worlds, nothing gated out ever reaches the language model.

Every prompt the chat sends is recorded by a real local HTTP stub. Each world has
people with random consent and memories with random participants; every memory
carries a distinctive random token and names its participants in its text, so a
leak of its text or of a non-consenting person's name would show up verbatim.
Questions mix shared vocabulary with people's names and aliases: a name the owner
(or the agent, through its token) types is theirs to send, so it may reach the model
inside the question, and nowhere else.

The expected prompt contents come from a few lines of plain Python (the policy,
independently of the SQL gate): a memory may be shown when every participant
and its source have consent `granted`; it is shown for a question when it shares
a word with it (full text, ORed words, names included; nothing is embedded in
these worlds). The reply tells the owner who is withheld (people without consent,
in some memory, named in the question), and tells an agent asking with its own
token nothing of the kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.db import transaction
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from accounts.services import user_signup
from agents.models import AccessLog
from agents.services import chat_turn
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent
from tests.agents.roles import AGENT_ROLES, PER_ROLE_EXAMPLES, agent_with_role

VOCABULARY = ["garden", "violin", "harbour", "lantern", "orchard", "bicycle", "kitchen"]
# Consonants only: a random token can never be an English word in the fixed prompt text.
TOKEN = st.text(alphabet="bcdfghjklmnpqrstvwxz", min_size=7, max_size=10)
CONSENT = st.sampled_from([ConsentStatus.GRANTED, ConsentStatus.PENDING, ConsentStatus.REVOKED])


@dataclass
class PersonPlan:
    name: str
    alias: str
    consent: str


@dataclass
class MemoryPlan:
    token: str
    words: list[str]
    participants: list[int]  # indexes into people; -1 is the owner's Self
    source: int | None


@dataclass
class WorldPlan:
    people: list[PersonPlan]
    memories: list[MemoryPlan]
    questions: list[list[str]]
    asked_by_agent: list[bool]


@st.composite
def worlds(draw) -> WorldPlan:
    person_count = draw(st.integers(min_value=1, max_value=4))
    memory_count = draw(st.integers(min_value=1, max_value=7))
    tokens = draw(
        st.lists(
            TOKEN,
            min_size=2 * person_count + memory_count,
            max_size=2 * person_count + memory_count,
            unique=True,
        )
    )
    # No token inside another: "is this name in the prompt" must mean this name.
    assume(not any(token != other and token in other for token in tokens for other in tokens))
    people = [
        PersonPlan(name=tokens[2 * i].capitalize(), alias=tokens[2 * i + 1], consent=draw(CONSENT))
        for i in range(person_count)
    ]
    memories = []
    for i in range(memory_count):
        participants = draw(
            st.lists(st.integers(min_value=-1, max_value=person_count - 1), max_size=3, unique=True)
        )
        source = draw(st.none() | st.integers(min_value=0, max_value=person_count - 1))
        words = draw(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3, unique=True))
        memories.append(
            MemoryPlan(
                token=tokens[2 * person_count + i], words=words, participants=participants, source=source
            )
        )
    names = [person.name for person in people] + [person.alias for person in people]
    words = st.sampled_from(VOCABULARY) | st.sampled_from(names)
    questions = draw(st.lists(st.lists(words, min_size=1, max_size=3, unique=True), min_size=1, max_size=3))
    asked_by_agent = draw(st.lists(st.booleans(), min_size=len(questions), max_size=len(questions)))
    return WorldPlan(people=people, memories=memories, questions=questions, asked_by_agent=asked_by_agent)


def _may_be_shown(plan: WorldPlan, memory: MemoryPlan) -> bool:
    """The policy in plain Python: everyone in it, and whoever told it, has granted consent."""
    involved = [index for index in memory.participants if index >= 0]
    if memory.source is not None:
        involved.append(memory.source)
    return all(plan.people[index].consent == ConsentStatus.GRANTED for index in involved)


def _matches(plan: WorldPlan, memory: MemoryPlan, words: list[str]) -> bool:
    """Full text: the memory's words and the names of the people in it (its body names them)."""
    named = {plan.people[index].name.lower() for index in memory.participants if index >= 0}
    return bool({word.lower() for word in words} & (set(memory.words) | named))


def _withheld(plan: WorldPlan, words: list[str]) -> set[str]:
    """Who the owner is told about: no consent, in some memory (or told one), named in the question."""
    involved = {index for memory in plan.memories for index in memory.participants if index >= 0}
    involved |= {memory.source for memory in plan.memories if memory.source is not None}
    asked = {word.lower() for word in words}
    return {
        plan.people[index].name
        for index in involved
        if plan.people[index].consent != ConsentStatus.GRANTED
        and asked & {plan.people[index].name.lower(), plan.people[index].alias.lower()}
    }


def _build(plan: WorldPlan):
    owner = user_signup(username="owner", password="correct horse battery")
    self_person = Person.objects.get(owner=owner, is_self=True)
    people = []
    for person_plan in plan.people:
        person = person_create(owner=owner, display_name=person_plan.name, aliases=[person_plan.alias])
        if person_plan.consent != ConsentStatus.PENDING:
            person_set_consent(person=person, status=person_plan.consent, actor=owner)
        people.append(person)
    memories = []
    for memory_plan in plan.memories:
        participants = [self_person if index < 0 else people[index] for index in memory_plan.participants]
        names = " and ".join(person.display_name for person in participants if not person.is_self)
        body = f"{memory_plan.token}: {' '.join(memory_plan.words)}" + (f" with {names}" if names else "")
        memories.append(
            memory_create(
                owner=owner,
                body=body,
                kind="knowledge",
                sensitivity="personal",
                participants=[ParticipantSpec(person=person) for person in participants],
                source_person=None if memory_plan.source is None else people[memory_plan.source],
            )
        )
    return owner, memories


@pytest.mark.parametrize("agent_role", AGENT_ROLES)
def test_no_prompt_ever_holds_a_gated_memory_or_a_non_consenting_persons_name(db, llm_stub, agent_role):
    @settings(max_examples=PER_ROLE_EXAMPLES)
    @given(plan=worlds())
    # One question inside another, the longer naming someone withheld: its echo is the
    # asker's own words, not a leak (stripping the shorter first used to cut it apart).
    @example(
        plan=WorldPlan(
            people=[
                PersonPlan(name="Bbbbbbb", alias="bbbbbbc", consent=ConsentStatus.GRANTED),
                PersonPlan(name="Bbbbbbd", alias="bbbbbbf", consent=ConsentStatus.PENDING),
            ],
            memories=[MemoryPlan(token="bbbbbbg", words=["garden"], participants=[1], source=None)],
            questions=[["bbbbbbc"], ["Bbbbbbd", "bbbbbbc"]],
            asked_by_agent=[False, False],
        )
    )
    def check(plan: WorldPlan) -> None:
        with transaction.atomic():
            llm_stub.requests.clear()
            owner, memories = _build(plan)
            agent = agent_with_role(owner=owner, role=agent_role)
            conversation = None
            asked: list[str] = []
            for words, asked_by_agent in zip(plan.questions, plan.asked_by_agent, strict=True):
                question = " ".join(words) + "?"
                asked.append(question)
                turn = chat_turn(
                    owner=owner,
                    agent=agent,
                    text=question,
                    conversation=conversation,
                    asked_by_agent=asked_by_agent,
                )
                conversation = turn.conversation
                prompt = json.dumps(llm_stub.requests[-1])

                expected = {
                    memory_plan.token
                    for memory_plan in plan.memories
                    if _may_be_shown(plan, memory_plan) and _matches(plan, memory_plan, words)
                }
                sent = {memory_plan.token for memory_plan in plan.memories if memory_plan.token in prompt}
                assert sent == expected
                # Names typed in this or an earlier question are the asker's own words.
                # Longest first: a question that is part of another ("Bob?" in "Ann Bob?")
                # would otherwise cut the longer one's echo apart and leave its name behind.
                for text in sorted(set(asked), key=len, reverse=True):
                    prompt = prompt.replace(text, "")
                reply = turn.reply.content
                for person_plan in plan.people:
                    if person_plan.consent != ConsentStatus.GRANTED:
                        for name in (person_plan.name.lower(), person_plan.alias.lower()):
                            assert name not in prompt.lower()
                            if asked_by_agent:
                                assert name not in reply.lower()
                told = {person.display_name for person in turn.withheld_people}
                assert told == (set() if asked_by_agent else _withheld(plan, words))
                assert ("not consented" in reply) == bool(told)
                logged = set(
                    AccessLog.objects.filter(
                        owner=owner, created_at__gte=turn.question.created_at
                    ).values_list("memory__body", flat=True)
                )
                assert {body.split(":")[0] for body in logged} == expected
            assert len(llm_stub.requests) == len(plan.questions)
            transaction.set_rollback(True)

    check()
