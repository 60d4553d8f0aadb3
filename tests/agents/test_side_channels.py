"""No side channels to agents: nothing an agent receives depends on what it may not see.

An agent (its token on the API, the MCP tools, its prompt) must get byte for byte the
same answers whether a person or memory hidden from it exists or not: same replies,
counts, pages, error texts, lookups. The named tests below pin each leak found in the
hardening review; the property test at the end generates journals, asks every
agent-facing surface everything it can, then deletes what the shared oracle
(tests/memories/consent_oracle.py) says agents may not see and asks again: the two
sets of answers must be identical. The owner may still be told, in their own chat,
who is withheld, but never through the prompt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from accounts.models import TokenKind
from accounts.services import access_token_authenticate, access_token_create, user_signup
from agents.mcpserver import tools
from agents.models import Agent, ConsentRequest, Message, MessageRole
from memories.models import EMBEDDING_DIMENSIONS, Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent, person_update
from tests.agents.roles import AGENT_ROLES, PER_ROLE_EXAMPLES, agent_with_role
from tests.api.conftest import ApiClient
from tests.memories.consent_oracle import OracleMemory, OraclePerson, OracleWorld

pytestmark = pytest.mark.django_db

NOBODY_ID = "00000000-0000-4000-8000-000000000000"
NOTICE_WORDS = ["not consented", "Memories involving"]


# --- Alice's journal for the named tests --------------------------------------------------------
@dataclass
class Hidden:
    """Bob (alias Bobby, in a memory), Dana (only as who told a memory), Erin (in none)."""

    alice: object
    caregiver: Agent
    agent_token: str
    owner_token: str
    bob: Person
    dana: Person
    erin: Person
    carol: Person
    hidden_memories: list[Memory] = field(default_factory=list)

    @property
    def people(self) -> list[Person]:
        return [self.bob, self.dana, self.erin]

    def forget(self) -> None:
        """Make the hidden people and memories never have existed."""
        Memory.objects.filter(pk__in=[memory.pk for memory in self.hidden_memories]).delete()
        Person.objects.filter(pk__in=[person.pk for person in self.people]).delete()


@pytest.fixture
def hidden(alice, journal) -> Hidden:
    dana = person_create(owner=alice, display_name="Dana", aliases=["Dee"], notes="Dana's secret")
    erin = person_create(owner=alice, display_name="Erin", aliases=["Rinny"])
    told = memory_create(
        owner=alice,
        body="The park gate was painted green last spring.",
        kind="knowledge",
        sensitivity="personal",
        source_person=dana,
    )
    _, agent_token = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=journal.caregiver)
    _, owner_token = access_token_create(owner=alice, kind=TokenKind.OWNER)
    return Hidden(
        alice=alice,
        caregiver=journal.caregiver,
        agent_token=agent_token,
        owner_token=owner_token,
        bob=journal.bob,
        dana=dana,
        erin=erin,
        carol=journal.carol,
        hidden_memories=[journal.chess, told],
    )


def _api(token: str) -> ApiClient:
    return ApiClient(Client(), token)


def _answer(response) -> tuple[int, str]:
    return response.status_code, response.content.decode()


QUESTION = "Tell me about Bob, bobby, Carol, Dana, Dee, Erin and Zed in the park"


def _agent_chat(hidden: Hidden) -> dict:
    response = _api(hidden.agent_token).post(
        reverse("api-agent-chat", args=[hidden.caregiver.pk]), {"message": QUESTION}
    )
    assert response.status_code == 200
    body = response.json()
    del body["conversation"]  # a new conversation each time
    return body


# --- 1. the chat ---------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["offline", "llm_stub"])
def test_agent_token_chat_says_the_same_whether_named_people_are_withheld_or_absent(request, hidden, model):
    stub = request.getfixturevalue(model)

    withheld = _agent_chat(hidden)
    withheld_prompt = stub.requests[-1]["messages"] if stub is not None else None
    hidden.forget()
    absent = _agent_chat(hidden)

    assert withheld == absent
    if stub is not None:
        assert stub.requests[-1]["messages"] == withheld_prompt
    for word in [*NOTICE_WORDS, "Bob", "Dana", "Erin", "Dee", "Rinny"]:
        assert word not in withheld["reply"]


def test_agent_token_chat_names_no_one_and_records_no_one_as_withheld(hidden, offline):
    reply = _agent_chat(hidden)["reply"]

    assert "Carol planted red tulips" in reply
    message = hidden.caregiver.conversations.get().messages.get(role="assistant")
    assert list(message.withheld_people.all()) == []


def test_owner_is_told_who_is_withheld_but_no_prompt_ever_is(hidden, alice_client, llm_stub):
    api = _api(hidden.owner_token)
    url = reverse("api-agent-chat", args=[hidden.caregiver.pk])
    started = api.post(url, {"message": QUESTION}).json()
    # A follow-up in the same conversation: the earlier reply, notice and all, stays out.
    api.post(url, {"message": "And the tulips?", "conversation": started["conversation"]})
    alice_client.post(reverse("agent_chat_send", args=[hidden.caregiver.pk]), {"message": QUESTION})

    notice = "Memories involving Bob and Dana are not available to agents because they have not consented."
    assert notice in started["reply"]
    web_reply = Message.objects.filter(role=MessageRole.ASSISTANT).order_by("created_at").last()
    assert notice in web_reply.content
    assert len(llm_stub.requests) == 3
    for body in llm_stub.requests:
        prompt = json.dumps(body["messages"])
        for word in NOTICE_WORDS:
            assert word not in prompt
        # Withheld names reach the model only inside the owner's own words.
        for question in (QUESTION, "And the tulips?"):
            prompt = prompt.replace(question, "")
        for name in ["Bob", "Dana", "Erin", "Dee", "Rinny"]:
            assert name not in prompt


# --- 2. MCP get_person ---------------------------------------------------------------------------
def _lookup(token, name: str) -> str:
    try:
        return json.dumps(tools.get_person(token=token, name=name))
    except tools.ToolInputError as error:
        return f"error: {error}"


LOOKUPS = ["Bob", "bobby", "BOBBY", "Bobb", "obby", "Dana", "dee", "Erin", "Rinny", "Rinn", "Zed", "Caro"]


def test_mcp_get_person_answers_for_a_hidden_person_exactly_as_for_no_one(hidden):
    token = access_token_authenticate(raw_token=hidden.agent_token)

    before = {name: _lookup(token, name) for name in LOOKUPS}
    hidden.forget()
    after = {name: _lookup(token, name) for name in LOOKUPS}

    assert before == after
    # Every one of them is one answer, bar the name asked.
    assert len({answer.replace(repr(name), "NAME") for name, answer in before.items()}) == 1
    assert before["Zed"].startswith("error: No one called 'Zed'")


def test_mcp_get_person_matches_whole_names_and_aliases_in_any_case_only(hidden):
    person_update(person=hidden.carol, display_name="Carol", aliases=["Caz"])
    token = access_token_authenticate(raw_token=hidden.agent_token)

    for name in ["Carol", "CAROL", "caz", "  Caz "]:
        assert [person["name"] for person in tools.get_person(token=token, name=name)["people"]] == ["Carol"]
    for fragment in ["Car", "arol", "Ca", "Carol Smith"]:
        with pytest.raises(tools.ToolInputError, match="^No one called"):
            tools.get_person(token=token, name=fragment)


# --- 3. the people API ---------------------------------------------------------------------------
def _people_answers(hidden: Hidden) -> list[tuple[int, str]]:
    api = _api(hidden.agent_token)
    return [
        _answer(api.get("/api/v1/people/")),
        *(_answer(api.get(f"/api/v1/people/{person.pk}/")) for person in hidden.people),
        _answer(api.get(f"/api/v1/people/{hidden.carol.pk}/")),
    ]


def test_agent_people_api_does_not_move_when_the_owner_edits_or_deletes_a_hidden_person(hidden):
    before = _people_answers(hidden)
    owner = _api(hidden.owner_token)
    assert owner.patch(f"/api/v1/people/{hidden.bob.pk}/", {"notes": "New hidden notes"}).status_code == 200
    assert owner.patch(f"/api/v1/people/{hidden.dana.pk}/", {"aliases": ["Dee", "DD"]}).status_code == 200
    edited = _people_answers(hidden)
    hidden.forget()
    forgotten = _people_answers(hidden)

    assert before == edited == forgotten
    nobody = _answer(_api(hidden.agent_token).get(f"/api/v1/people/{NOBODY_ID}/"))
    assert before[1:4] == [nobody] * 3
    assert nobody[0] == 404


def test_agents_are_never_given_a_persons_updated_at(hidden):
    api = _api(hidden.agent_token)
    person_update(person=hidden.carol, display_name="Carol", notes="Carol moved house.")

    (carol,) = [p for p in api.get("/api/v1/people/").json()["results"] if p["display_name"] == "Carol"]
    assert carol["notes"] == "Carol moved house."
    assert carol["updated_at"] is None
    assert api.get(f"/api/v1/people/{hidden.carol.pk}/").json()["updated_at"] is None
    # The owner still gets it.
    assert _api(hidden.owner_token).get(f"/api/v1/people/{hidden.carol.pk}/").json()["updated_at"]


# --- 4. memories narrowed to a person ---------------------------------------------------------
def test_memory_list_narrowed_to_a_hidden_person_answers_like_an_unknown_one(hidden):
    api = _api(hidden.agent_token)

    answers = [_answer(api.get("/api/v1/memories/", {"person": str(p.pk)})) for p in hidden.people]
    nobody = _answer(api.get("/api/v1/memories/", {"person": NOBODY_ID}))

    assert answers == [nobody] * 3
    assert nobody[0] == 400
    carol = api.get("/api/v1/memories/", {"person": str(hidden.carol.pk)}).json()
    assert carol["count"] == 1


# --- 5. consent requests -----------------------------------------------------------------------
def test_consent_requests_cannot_be_made_with_an_agent_token_and_answer_alike(hidden, client):
    headers = {"Authorization": f"Bearer {hidden.agent_token}"}

    answers = [
        client.post(
            reverse("consent_request_create"),
            {"person": person_id, "agent": str(hidden.caregiver.pk)},
            headers=headers,
        )
        for person_id in [str(hidden.bob.pk), NOBODY_ID]
    ]

    assert [(a.status_code, a.get("Location", "").split("?")[0]) for a in answers] == [
        (302, reverse("login"))
    ] * 2
    assert not ConsentRequest.objects.exists()


# --- the property: every agent-facing surface, against the oracle --------------------------------
# Consonants only, and no hex digits: a name is never an English word, nor a piece of
# the fixed texts or of an id.
TOKEN = st.text(alphabet="ghjklmnpqrstvwxz", min_size=7, max_size=10)
VOCABULARY = ["lantern", "orchard", "violin", "harbor", "meadow", "glacier"]
STATUSES = [ConsentStatus.GRANTED, ConsentStatus.PENDING, ConsentStatus.REVOKED]


@dataclass
class Plan:
    people: list[tuple[str, str, str]]  # name, alias, consent
    self_consent: str
    memories: list[dict]
    questions: list[list[str]]
    nobody: str


@st.composite
def plans(draw) -> Plan:
    count = draw(st.integers(min_value=1, max_value=4))
    tokens = draw(st.lists(TOKEN, min_size=2 * count + 1, max_size=2 * count + 1, unique=True))
    assume(not any(token != other and token in other for token in tokens for other in tokens))
    people = [
        (tokens[2 * i].capitalize(), tokens[2 * i + 1], draw(st.sampled_from(STATUSES))) for i in range(count)
    ]
    memories = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "words": st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=2, unique=True),
                    # -1 is the owner's Self
                    "participants": st.lists(st.integers(-1, count - 1), max_size=3, unique=True),
                    "source": st.none() | st.integers(0, count - 1),
                }
            ),
            min_size=1,
            max_size=6,
        )
    )
    names = [name for name, _, _ in people] + [alias for _, alias, _ in people]
    nobody = tokens[-1].capitalize()
    words = st.sampled_from([*VOCABULARY, *names, nobody])
    questions = draw(st.lists(st.lists(words, min_size=1, max_size=3), min_size=1, max_size=2))
    self_consent = draw(
        st.sampled_from([ConsentStatus.GRANTED, ConsentStatus.GRANTED, ConsentStatus.REVOKED])
    )
    return Plan(
        people=people, self_consent=self_consent, memories=memories, questions=questions, nobody=nobody
    )


@dataclass
class Built:
    owner: object
    oracle: OracleWorld
    people: list[Person]
    memories: list[Memory]
    agent: Agent
    raw_token: str


def _build(plan: Plan, agent_role: str) -> Built:
    owner = user_signup(username="side-channels", password="correct horse battery")
    me = Person.objects.get(owner=owner, is_self=True)
    if plan.self_consent != ConsentStatus.GRANTED:
        person_set_consent(person=me, status=plan.self_consent, actor=owner)
    oracle = OracleWorld()
    oracle.people[str(me.pk)] = OraclePerson(str(me.pk), "owner", plan.self_consent, is_self=True)
    people = []
    for name, alias, consent in plan.people:
        person = person_create(owner=owner, display_name=name, aliases=[alias], notes=f"notes on {alias}")
        if consent != ConsentStatus.PENDING:
            person_set_consent(person=person, status=consent, actor=owner)
        people.append(person)
        oracle.people[str(person.pk)] = OraclePerson(str(person.pk), "owner", consent)
    memories = []
    for number, spec in enumerate(plan.memories):
        participants = [me if index < 0 else people[index] for index in spec["participants"]]
        names = " and ".join(person.display_name for person in participants if not person.is_self)
        source = None if spec["source"] is None else people[spec["source"]]
        memory = memory_create(
            owner=owner,
            title=f"Memory {number}",
            body=" ".join(spec["words"]) + (f" with {names}" if names else ""),
            occurred_at=timezone.now() - timedelta(hours=number),
            kind="knowledge",
            sensitivity="personal",
            participants=[ParticipantSpec(person=person) for person in participants],
            source_person=source,
        )
        memories.append(memory)
        oracle.memories[str(memory.pk)] = OracleMemory(
            id=str(memory.pk),
            owner="owner",
            words=spec["words"],
            kind=memory.kind,
            occurred_at=memory.occurred_at,
            participants={str(person.pk): "subject" for person in participants},
            source_person=None if source is None else str(source.pk),
        )
    agent = agent_with_role(owner=owner, role=agent_role)
    _, raw_token = access_token_create(owner=owner, kind=TokenKind.AGENT, agent=agent)
    return Built(owner, oracle, people, memories, agent, raw_token)


def _everything_an_agent_receives(built: Built, plan: Plan, stub) -> dict[str, str]:
    """Every agent-facing answer for this journal, by what was asked."""
    api = _api(built.raw_token)
    token = access_token_authenticate(raw_token=built.raw_token)
    person_ids = [str(person.pk) for person in built.people] + [NOBODY_ID]
    memory_ids = [str(memory.pk) for memory in built.memories] + [NOBODY_ID]
    answers: dict[str, str] = {}

    def ask(key: str, response) -> None:
        answers[key] = f"{response.status_code} {response.content.decode()}"

    ask("people", api.get("/api/v1/people/"))
    for person_id in person_ids:
        ask(f"person {person_id}", api.get(f"/api/v1/people/{person_id}/"))
        ask(f"memories of {person_id}", api.get("/api/v1/memories/", {"person": person_id}))
    for offset in range(0, len(built.memories) + 2, 2):
        ask(f"memories page {offset}", api.get("/api/v1/memories/", {"limit": 2, "offset": offset}))
    for memory_id in memory_ids:
        ask(f"memory {memory_id}", api.get(f"/api/v1/memories/{memory_id}/"))
        ask(f"similar {memory_id}", api.get(f"/api/v1/memories/{memory_id}/similar/"))
        answers[f"mcp audit {memory_id}"] = _tool(tools.privacy_audit, token=token, memory_id=memory_id)
    for number, words in enumerate(plan.questions):
        question = " ".join(words)
        ask(f"search {number}", api.get("/api/v1/memories/search/", {"q": question}))
        chat = api.post(reverse("api-agent-chat", args=[built.agent.pk]), {"message": question})
        body = chat.json()
        del body["conversation"]
        answers[f"chat {number}"] = f"{chat.status_code} {json.dumps(body)}"
        answers[f"prompt {number}"] = json.dumps(stub.requests[-1]["messages"])
        answers[f"mcp search {number}"] = _tool(tools.search_memories, token=token, query=question)
    today = timezone.localdate()
    answers["mcp timeline"] = _tool(
        tools.timeline_window,
        token=token,
        start=(today - timedelta(days=2)).isoformat(),
        end=(today + timedelta(days=1)).isoformat(),
    )
    for name, alias, _ in plan.people:
        for asked in (name, alias, alias.upper(), alias[:4], plan.nobody):
            answers[f"mcp person {asked}"] = _tool(tools.get_person, token=token, name=asked)
    return answers


def _tool(tool, **arguments) -> str:
    try:
        return json.dumps(tool(**arguments))
    except tools.ToolInputError as error:
        return f"error: {error}"


def _check_against_the_oracle(built: Built, answers: dict[str, str]) -> None:
    now = timezone.now()
    visible = set(built.oracle.visible("owner", respect_consent=True, now=now))
    granted = {
        pid for pid, person in built.oracle.people.items() if person.consent_status == ConsentStatus.GRANTED
    }
    people = json.loads(answers["people"].split(" ", 1)[1])["results"]
    assert {person["id"] for person in people} == granted
    first_page = json.loads(answers["memories page 0"].split(" ", 1)[1])
    assert first_page["count"] == len(visible)
    for key, answer in answers.items():
        if key.startswith("chat "):
            cited = {citation["id"] for citation in json.loads(answer.split(" ", 1)[1])["citations"]}
            assert cited <= visible


def _strip_hidden(built: Built) -> None:
    """Delete what the oracle says agents may not see: the world an agent should believe in."""
    now = timezone.now()
    visible = set(built.oracle.visible("owner", respect_consent=True, now=now))
    hidden_memories = [memory_id for memory_id in built.oracle.memories if memory_id not in visible]
    hidden_people = [
        pid for pid, person in built.oracle.people.items() if person.consent_status != ConsentStatus.GRANTED
    ]
    Memory.objects.filter(pk__in=hidden_memories).delete()
    Person.objects.filter(pk__in=hidden_people).delete()
    for memory_id in hidden_memories:
        del built.oracle.memories[memory_id]
    for person_id in hidden_people:
        del built.oracle.people[person_id]


def _hidden_names(plan: Plan) -> list[str]:
    return [
        word.lower()
        for name, alias, consent in plan.people
        if consent != ConsentStatus.GRANTED
        for word in (name, alias)
    ]


def _stand_in_embedding(text: str) -> list[float]:
    return [1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1)


@pytest.mark.parametrize("agent_role", AGENT_ROLES)
def test_every_agent_surface_answers_as_if_what_it_may_not_see_did_not_exist(
    db, llm_stub, monkeypatch, agent_role
):
    # Nothing in these worlds is embedded, so what a question means cannot change any
    # answer: a fixed stand-in for the model keeps a world to a second on a busy CPU,
    # where the real one takes about a second per question (the named tests above use it).
    monkeypatch.setattr("memories.embeddings.embed_text", _stand_in_embedding)

    @settings(max_examples=PER_ROLE_EXAMPLES)
    @given(plan=plans())
    # One question inside another, the longer naming someone withheld.
    @example(
        plan=Plan(
            people=[("Ggggggg", "hhhhhhh", ConsentStatus.PENDING)],
            self_consent=ConsentStatus.GRANTED,
            memories=[{"words": ["lantern"], "participants": [0], "source": None}],
            questions=[["lantern"], ["lantern", "hhhhhhh"]],
            nobody="Jjjjjjj",
        )
    )
    def check(plan: Plan) -> None:
        with transaction.atomic():
            built = _build(plan, agent_role)
            withheld = _everything_an_agent_receives(built, plan, llm_stub)
            _check_against_the_oracle(built, withheld)

            # Nothing names a hidden person, except where the agent's own words are echoed back.
            # Longest first: a question that is part of another ("lantern" in "lantern Bob")
            # would otherwise cut the longer one's echo apart and leave its name behind.
            questions = sorted({" ".join(words) for words in plan.questions}, key=len, reverse=True)
            for key, answer in withheld.items():
                if key.startswith("mcp person"):
                    continue
                text = answer
                for question in questions:
                    text = text.replace(json.dumps(question), "").replace(question, "")
                for name in _hidden_names(plan):
                    assert name not in text.lower(), (key, name)

            _strip_hidden(built)
            absent = _everything_an_agent_receives(built, plan, llm_stub)
            _check_against_the_oracle(built, absent)
            assert withheld == absent
            transaction.set_rollback(True)

    check()
