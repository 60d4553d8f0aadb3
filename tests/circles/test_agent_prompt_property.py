"""Property: what a circle's agent hands the language model, or a member's agent, for every viewer set.

Hypothesis builds the circles property test's worlds (CircleWorld: users, circles,
members, people with consent per audience, linked people, memories with roles,
sources, sensitivities, expiry, supersession and shares) and then drives the real
surfaces, with the LLM replaced by the local HTTP stub (real HTTP, every request
recorded):

- the circle's shared chat (read by every current member) and members' private
  chats (one member alone), through the service, the page's form post and its htmx
  post, with the question embedded or with full text only;
- between turns, random changes from the world's change list (consent per audience,
  members joining, leaving or removed, shares, links, a circle deleted), and a
  consent revoked for a person in a memory the last prompt used, followed by the
  same question again;
- agent-to-agent reads with a member's agent token: the API's circle timeline and
  search, and MCP search_memories and timeline_window with `circle`, with the
  circle's "members' agents may read" switch on or off.

Every memory body starts with a token of its own and every person is renamed to a
token, so a memory or a name in a prompt shows up verbatim. What may be sent comes
from tests/memories/consent_oracle.py (circle_agent_visible: the viewer-set rule,
never alone in a shared chat, expired and superseded memories left out); what must
be sent from a few lines here on what a question matches. Every prompt (and every
agent-to-agent answer):
- holds no memory outside the oracle's set for exactly its viewer set;
- holds every memory of that set the question matches: exactly the word matches
  when there is no embedding model; with one, at least the memory whose vector the
  question has (which others pass is the search's relevance cut-off, not policy);
- names nobody who is not in one of the memories it holds;
- after a consent revoked between two turns, no longer holds the memory.
The reply cites exactly the memories its prompt held; a non-member's question never
reaches the model; a refused agent read names no memory and nobody.
"""

from __future__ import annotations

import json
from datetime import timedelta
from unittest import mock

import pytest
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from hypothesis import event, example, given
from hypothesis import strategies as st

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.mcpserver import tools
from agents.models import Agent, AgentRole
from circles.agent import circle_chat_turn, circle_conversation
from circles.models import Circle, CircleMessage
from circles.services import circle_update
from memories.models import Memory
from memories.retrieval import MAX_LIMIT
from people.models import Person
from tests.circles.test_circle_property import (
    VOCABULARY,
    CircleWorld,
    change_spec,
    vector_path,
    world_spec,
)
from tests.privacy import privacy_settings

pytestmark = pytest.mark.django_db

# Consonants only, one length: a token is never an English word of the fixed prompt
# text, a hex run of an id, or a part of another token.
CONSONANTS = "bcdfghjklmnpqrstvwxz"
# None: the embedding model is unavailable (full text only). A number: the question's
# vector is that of one of the world's embedded memories (the anchor, by index; one
# the viewers may see when there is one), so it is the closest match by meaning
# under any relevance cut-off.
EMBEDDING = st.none() | st.integers(0, 20)
QUESTION_WORDS = st.lists(st.sampled_from([*VOCABULARY, "zebra"]), min_size=1, max_size=3, unique=True)

turn_spec = st.fixed_dictionaries(
    {
        "circle": st.integers(0, 2),
        # Which current member asks (an index into them); now and then someone who is not one.
        "asker": st.integers(0, 5),
        "outsider": st.integers(0, 5).map(lambda number: number == 0),
        "private": st.booleans(),
        "via": st.sampled_from(["service", "form", "htmx"]),
        "words": QUESTION_WORDS,
        "embedding": EMBEDDING,
        # Revoke, for the circle, someone in a memory this prompt used, and ask again.
        "revoke_after": st.sampled_from([True, True, False]),
        "change_after": st.none() | change_spec,
    }
)
read_spec = st.fixed_dictionaries(
    {
        "circle": st.integers(0, 2),
        # Which current member's agent reads (an index into them); now and then a non-member's.
        "reader": st.integers(0, 5),
        "outsider": st.integers(0, 5).map(lambda number: number == 0),
        "allowed": st.sampled_from([True, True, False]),
        "via": st.sampled_from(["api_timeline", "api_search", "mcp_search", "mcp_timeline"]),
        "words": QUESTION_WORDS,
        "embedding": EMBEDDING,
    }
)
# Applied once the world is built, so that more of what is shared is open to an agent
# and the prompts have memories to hold (or to leave out): grants for a circle and
# shares through the service (CircleWorld.apply, as its changes), and memories made
# current (not expired, not replaced) or public, in the database and the oracle alike.
opening_spec = st.one_of(
    st.tuples(st.just("consent"), st.integers(0, 11), st.integers(0, 2), st.just("granted")),
    st.tuples(st.just("consent"), st.integers(0, 11), st.integers(0, 2), st.just("granted")),
    st.tuples(st.just("share"), st.integers(0, 9), st.integers(0, 2)),
    st.tuples(st.just("current"), st.integers(0, 9)),
    st.tuples(st.just("public"), st.integers(0, 9)),
)
spec_strategy = st.fixed_dictionaries(
    {
        "world": world_spec,
        "openings": st.lists(opening_spec, min_size=2, max_size=12),
        "turns": st.lists(turn_spec, min_size=2, max_size=5),
        "reads": st.lists(read_spec, min_size=1, max_size=4),
    }
)


# Always run as well (hypothesis's explicit example): Alice (user 0) owns circle 0 with
# Bob and Carol. A public memory with Pat, who granted for the circle, a sensitive one
# about Bob (linked, granted), an expired one and one replaced by the first. The shared
# chat gets the first only; Pat revokes and the same question's next prompt has none;
# Bob's private chat and his agent get the sensitive one about him.
ALWAYS = {
    "world": {
        "users": 3,
        "circles": [{"owner": 0, "members": [1, 2]}],
        "people": [
            {"owner": 0, "consents": {"agents": "granted", 0: "granted", 1: None, 2: None}, "linked": None},
            {"owner": 0, "consents": {"agents": "pending", 0: "granted", 1: None, 2: None}, "linked": 1},
        ],
        "self_rows_revoked": False,
        "memories": [
            {
                "owner": 0,
                "words": ["lantern", "harbor"],
                "vector_seed": 7,
                "participants": [(1, "present")],
                "source": None,
                "sensitivity": "public",
                "expiry": None,
                "superseded_by": None,
                "days_ago": 3,
                "shares": [(0, "service")],
            },
            {
                "owner": 0,
                "words": ["lantern", "glacier"],
                "vector_seed": 8,
                "participants": [(2, "subject")],
                "source": None,
                "sensitivity": "sensitive",
                "expiry": None,
                "superseded_by": None,
                "days_ago": 1,
                "shares": [(0, "row")],
            },
            {
                "owner": 0,
                "words": ["lantern"],
                "vector_seed": None,
                "participants": [],
                "source": None,
                "sensitivity": "public",
                "expiry": "past",
                "superseded_by": None,
                "days_ago": 2,
                "shares": [(0, "row")],
            },
            {
                "owner": 0,
                "words": ["lantern"],
                "vector_seed": None,
                "participants": [],
                "source": None,
                "sensitivity": "public",
                "expiry": None,
                "superseded_by": 0,
                "days_ago": 4,
                "shares": [(0, "row")],
            },
        ],
        "stories": [],
        "changes": [("add", 0, 1)],
    },
    "openings": [],
    "turns": [
        {
            "circle": 0,
            "asker": 1,
            "outsider": False,
            "private": False,
            "via": "service",
            "words": ["lantern"],
            "embedding": None,
            "revoke_after": True,
            "change_after": None,
        },
        {
            "circle": 0,
            "asker": 1,
            "outsider": False,
            "private": True,
            "via": "form",
            "words": ["glacier"],
            "embedding": 1,
            "revoke_after": False,
            "change_after": None,
        },
    ],
    "reads": [
        {
            "circle": 0,
            "reader": 1,
            "outsider": False,
            "allowed": True,
            "via": "mcp_search",
            "words": ["glacier"],
            "embedding": None,
        }
    ],
}


def token(prefix: str, number: int) -> str:
    """`prefix` and six consonants spelling `number`: distinct numbers, distinct tokens."""
    digits = ""
    for _ in range(6):
        number, digit = divmod(number, len(CONSONANTS))
        digits += CONSONANTS[digit]
    return prefix + digits


class PromptWorld:
    """A CircleWorld whose memories and people can be recognised verbatim in any text."""

    def __init__(self, spec: dict, llm_stub) -> None:
        self.world = CircleWorld(spec["world"])
        self.oracle = self.world.oracle
        self.stub = llm_stub
        self.memory_token: dict[str, str] = {}
        for number, memory in enumerate(self.world.memories):
            self.memory_token[str(memory.pk)] = token("zq", number)
            Memory.objects.filter(pk=memory.pk).update(body=f"{token('zq', number)} {memory.body}")
        self.person_name: dict[str, str] = {}
        for number, person in enumerate(self.world.people):
            if not person.is_self:
                self.person_name[str(person.pk)] = token("xk", number).capitalize()
                Person.objects.filter(pk=person.pk).update(display_name=self.person_name[str(person.pk)])
        self._tokens: dict[int, tuple] = {}

    def open(self, opening: tuple) -> None:
        if opening[0] in ("consent", "share"):
            self.world.apply(opening)
            return
        memory = self.world.memories[opening[1] % len(self.world.memories)]
        oracle_memory = self.oracle.memories[str(memory.pk)]
        if opening[0] == "current":
            Memory.objects.filter(pk=memory.pk).update(expires_at=None, superseded_by=None)
            oracle_memory.expires_at = oracle_memory.superseded_by = None
        else:
            Memory.objects.filter(pk=memory.pk).update(sensitivity="public")
            oracle_memory.sensitivity = "public"

    # --- what the oracle allows --------------------------------------------------------

    def people_in(self, memory_ids: set[str]) -> set[str]:
        """The people named with these memories (participants and sources)."""
        people = set()
        for memory_id in memory_ids:
            memory = self.oracle.memories[memory_id]
            people |= set(memory.participants)
            if memory.source_person is not None:
                people.add(memory.source_person)
        return people

    def anchor(self, embedding: int | None, *, visible: set[str]) -> str | None:
        """The memory whose vector the question gets; None: no model (or nothing embedded)."""
        embedded = sorted(memory_id for memory_id, memory in self.oracle.memories.items() if memory.embedding)
        preferred = [memory_id for memory_id in embedded if memory_id in visible] or embedded
        return None if embedding is None or not preferred else preferred[embedding % len(preferred)]

    def matching(
        self, visible: set[str], words: list[str], *, anchor: str | None, all_words: bool
    ) -> tuple[set[str], set[str]]:
        """What a question (all_words=False: its words are ORed) or a search (every word
        required) must and may return among `visible`, as (at least, at most).

        Full text only: exactly the memories whose words match. With a vector: at
        most the word matches and every embedded memory; at least the anchor, whose
        vector the question has. Which others pass is the search's relevance cut-off
        (its ranking, not the policy)."""
        candidates = {memory_id: self.oracle.memories[memory_id] for memory_id in visible}
        text = (
            self.oracle.text_matches(candidates, words)
            if all_words
            else {memory_id for memory_id, memory in candidates.items() if set(memory.words) & set(words)}
        )
        if anchor is None:
            return text, text
        embedded = {memory_id for memory_id, memory in candidates.items() if memory.embedding is not None}
        return {anchor} & visible, text | embedded

    # --- what reached the model (or the agent) ------------------------------------------

    def check_text(
        self, text: str, *, allowed: set[str], at_least: set[str], at_most: set[str], where: str
    ) -> set[str]:
        """The memories whose bodies are in `text`: only from `allowed` (the oracle's set for
        these viewers), all of `at_least`, none beyond `at_most`; and no name of anyone in
        none of them. Returns them."""
        sent = {memory_id for memory_id, memory_token in self.memory_token.items() if memory_token in text}
        assert sent <= allowed, f"{where}: outside the viewers' set: {self.describe(sent - allowed)}"
        assert at_least <= sent, f"{where}: missing {self.describe(at_least - sent)}"
        assert sent <= at_most, f"{where}: not asked for: {self.describe(sent - at_most)}"
        named = {person_id for person_id, name in self.person_name.items() if name.lower() in text.lower()}
        assert named <= self.people_in(sent), f"{where}: names nobody may see here: {named}"
        return sent

    def describe(self, memory_ids: set[str]) -> list[str]:
        return [
            f"{memory_id} (owner {memory.owner}, {memory.sensitivity}, words {memory.words}, "
            f"{'embedded' if memory.embedding else 'no vector'}, expires {memory.expires_at}, "
            f"superseded by {memory.superseded_by})"
            for memory_id in sorted(memory_ids)
            for memory in [self.oracle.memories[memory_id]]
        ]

    def embedding(self, anchor: str | None):
        """The embedding model: unavailable, or giving the anchor's vector for any text."""
        if anchor is None:
            return mock.patch("memories.embeddings.embed_text", side_effect=RuntimeError("no model here"))
        return mock.patch(
            "memories.embeddings.embed_text", return_value=list(self.oracle.memories[anchor].embedding)
        )

    # --- the circle's chat ---------------------------------------------------------------

    def ask(self, circle: Circle, user, *, private: bool, via: str, question: str) -> int:
        """One question through the service or the page; the number of prompts sent."""
        before = len(self.stub.requests)
        if via == "service":
            conversation = circle_conversation(circle=circle, user=user, private=private)
            circle_chat_turn(conversation=conversation, user=user, text=question)
        else:
            client = Client()
            client.force_login(user)
            url = reverse("circle_chat_private_send" if private else "circle_chat_send", args=[circle.pk])
            headers = {"HTTP_HX_REQUEST": "true"} if via == "htmx" else {}
            response = client.post(url, {"message": question}, **headers)
            assert response.status_code == (200 if via == "htmx" else 302), response.status_code
            if via == "htmx":
                # The panel shows the conversation and its citations: never a body or a name.
                page = response.content.decode()
                assert not any(memory_token in page for memory_token in self.memory_token.values())
                assert not any(name.lower() in page.lower() for name in self.person_name.values())
        return len(self.stub.requests) - before

    def turn(self, spec: dict, *, number: int | str) -> str | None:
        """Ask as the spec says; check the prompt; the memory id to revoke someone in, if asked."""
        world, oracle = self.world, self.oracle
        circle = world.circle(spec["circle"])
        if circle is None:
            event("turn: circle deleted")
            return None
        circle_id = str(circle.pk)
        members = sorted(oracle.circles[circle_id].members, key=int)
        outsiders = sorted(set(world.user_by_id) - set(members), key=int)
        question = " ".join(spec["words"]) + "?"
        where = f"turn {number} {spec}"
        if spec["outsider"] or not members:
            if not outsiders:
                return None
            user = world.user_by_id[outsiders[spec["asker"] % len(outsiders)]]
            before = len(self.stub.requests)
            with self.embedding(self.anchor(spec["embedding"], visible=set())):
                if spec["via"] == "service":
                    with pytest.raises(PermissionDenied):
                        self.ask(circle, user, private=spec["private"], via="service", question=question)
                else:
                    client = Client()
                    client.force_login(user)
                    name = "circle_chat_private_send" if spec["private"] else "circle_chat_send"
                    response = client.post(reverse(name, args=[circle.pk]), {"message": question})
                    assert response.status_code == 404, where
            assert len(self.stub.requests) == before, f"{where}: a non-member's question reached the model"
            event("turn: outsider refused")
            return None
        asker = members[spec["asker"] % len(members)]
        user = world.user_by_id[asker]
        viewers = {asker} if spec["private"] else set(members)
        allowed = oracle.circle_agent_visible(
            circle_id, viewers, read_by_several=not spec["private"], now=timezone.now()
        )
        anchor = self.anchor(spec["embedding"], visible=allowed)
        with self.embedding(anchor):
            prompts = self.ask(circle, user, private=spec["private"], via=spec["via"], question=question)
        assert prompts == 1, f"{where}: {prompts} prompts for one question"
        prompt = "\n".join(message["content"] for message in self.stub.requests[-1]["messages"])
        at_least, at_most = self.matching(allowed, spec["words"], anchor=anchor, all_words=False)
        sent = self.check_text(prompt, allowed=allowed, at_least=at_least, at_most=at_most, where=where)
        conversation = circle_conversation(circle=circle, user=user, private=spec["private"])
        reply = conversation.messages.filter(role=CircleMessage.Role.ASSISTANT).order_by("created_at").last()
        cited = {str(memory_id) for memory_id in reply.cited_memories.values_list("pk", flat=True)}
        assert cited == sent, f"{where}: cites {cited}, the prompt held {sent}"
        event(f"turn: {'private' if spec['private'] else 'shared'}, {len(viewers)} viewers")
        event("turn: prompt with memories" if sent else "turn: prompt with none")
        if allowed:
            event("turn: the viewers' agent may use something")
        if at_least:
            event("turn: some memories had to be in the prompt (and were)")
        if oracle.circle_visible(circle_id, viewers) - allowed:
            # What members of this set would see, but their agent may not use.
            event("turn: expired, superseded or sensitive (several readers) left out")
        # A memory this prompt used whose people someone else must consent for.
        for memory_id in sorted(sent):
            memory = oracle.memories[memory_id]
            if viewers == {memory.owner}:
                continue  # the owner alone sees their own whatever anyone consents
            if self.revocable(memory_id):
                return memory_id
        return None

    def revocable(self, memory_id: str) -> list[Person]:
        memory = self.oracle.memories[memory_id]
        people = set(memory.participants) | ({memory.source_person} if memory.source_person else set())
        return [person for person in self.world.people if str(person.pk) in people and not person.is_self]

    def revoke_and_ask_again(self, spec: dict, memory_id: str, *, number: int) -> None:
        """Someone in the memory revokes (or their journal's owner does) for this circle: the
        very next prompt, same conversation and question, no longer holds it."""
        world = self.world
        circle = world.circle(spec["circle"])
        person = self.revocable(memory_id)[0]
        world.apply(("consent", world.people.index(person), world.circles.index(circle), "revoked"))
        before = len(self.stub.requests)
        self.turn({**spec, "revoke_after": False}, number=f"{number}, asked again after a revocation")
        assert len(self.stub.requests) == before + 1
        prompt = json.dumps(self.stub.requests[-1])
        assert self.memory_token[memory_id] not in prompt, f"turn {number}: revoked memory still sent"
        event("turn: revoked between two turns")

    # --- agent-to-agent ----------------------------------------------------------------------

    def agent_tokens(self, user) -> tuple:
        """(MCP token, API bearer secret) of the user's agent, made once."""
        if user.pk not in self._tokens:
            agent, _ = Agent.objects.get_or_create(
                owner=user, name="Reader", defaults={"role": AgentRole.CAREGIVER}
            )
            mcp_token, _ = access_token_create(owner=user, kind=TokenKind.AGENT, agent=agent)
            _, secret = access_token_create(owner=user, kind=TokenKind.AGENT, agent=agent)
            self._tokens[user.pk] = (mcp_token, secret)
        return self._tokens[user.pk]

    def read(self, spec: dict, *, number: int) -> None:
        world, oracle = self.world, self.oracle
        circle = world.circle(spec["circle"])
        if circle is None:
            if not world.deleted_circle_ids:
                return
            circle_id, may_read = str(world.deleted_circle_ids[0]), False
            reader = world.user(spec["reader"])
        else:
            circle_id = str(circle.pk)
            members = sorted(oracle.circles[circle_id].members, key=int)
            outsiders = sorted(set(world.user_by_id) - set(members), key=int)
            pool = outsiders if (spec["outsider"] and outsiders) or not members else members
            reader = world.user_by_id[pool[spec["reader"] % len(pool)]]
            if circle.agents_may_read != spec["allowed"]:
                circle_update(circle=circle, by=circle.owner, agents_may_read=spec["allowed"])
            may_read = spec["allowed"] and str(reader.pk) in oracle.circles[circle_id].members
        where = f"read {number} {spec} by {reader.pk}"
        mcp_token, secret = self.agent_tokens(reader)
        query = " ".join(spec["words"])
        end = (timezone.now() + timedelta(days=2)).date().isoformat()
        allowed = (
            oracle.circle_agent_visible(
                circle_id, {str(reader.pk)}, read_by_several=False, now=timezone.now()
            )
            if may_read
            else set()
        )
        anchor = self.anchor(spec["embedding"], visible=allowed)
        with self.embedding(anchor):
            if spec["via"].startswith("api"):
                params = {"limit": MAX_LIMIT} | ({"q": query} if spec["via"] == "api_search" else {})
                response = Client().get(
                    f"/api/v1/circles/{circle_id}/memories/", params, HTTP_AUTHORIZATION=f"Bearer {secret}"
                )
                text = response.content.decode()
                if not may_read:
                    assert response.status_code == 404, where
                else:
                    assert response.status_code == 200, where
                    returned = {row["id"] for row in response.json()["results"]}
            else:
                call = {
                    "mcp_search": lambda: tools.search_memories(
                        token=mcp_token, query=query, limit=MAX_LIMIT, circle=circle_id
                    ),
                    "mcp_timeline": lambda: tools.timeline_window(
                        token=mcp_token, start="2000-01-01", end=end, limit=MAX_LIMIT, circle=circle_id
                    ),
                }[spec["via"]]
                if not may_read:
                    with pytest.raises(tools.ToolInputError) as refused:
                        call()
                    text = str(refused.value)
                else:
                    answer = call()
                    text = json.dumps(answer)
                    rows = answer["results"] if spec["via"] == "mcp_search" else answer["memories"]
                    returned = {row["id"] for row in rows}
        if not may_read:
            # Refused like a circle that does not exist: no body, no name, nothing else.
            self.check_text(text, allowed=set(), at_least=set(), at_most=set(), where=where)
            event("read: refused")
            return
        if spec["via"] in ("api_search", "mcp_search"):
            at_least, at_most = self.matching(allowed, spec["words"], anchor=anchor, all_words=True)
        else:
            at_least = at_most = allowed
        sent = self.check_text(text, allowed=allowed, at_least=at_least, at_most=at_most, where=where)
        assert returned == sent, where
        event("read: memories handed over" if sent else "read: nothing to hand over")


@pytest.fixture
def unlimited_chat(settings):
    # Every match goes into the prompt, so "what matches appears" can be checked exactly.
    settings.AGENT_CHAT_MEMORY_LIMIT = MAX_LIMIT


# The stub and the chat's limit are set once for all examples (the stub's record is
# cleared at the start of each); the database is rolled back after each. As many
# examples as every privacy property test (tests/privacy.py).
@privacy_settings
@given(spec=spec_strategy, path=st.sampled_from(["exact", "index"]))
@example(spec=ALWAYS, path="exact")
def test_circle_agent_prompts_hold_exactly_what_every_viewer_may_see(llm_stub, unlimited_chat, spec, path):
    with vector_path(path), transaction.atomic():
        llm_stub.requests.clear()
        world = PromptWorld(spec, llm_stub)
        for opening in spec["openings"]:
            world.open(opening)
        changes = list(spec["world"]["changes"])
        for number, turn in enumerate(spec["turns"]):
            revoke = world.turn(turn, number=number)
            if turn["revoke_after"] and revoke is not None:
                world.revoke_and_ask_again(turn, revoke, number=number)
            if turn["change_after"] is not None:
                changes.append(turn["change_after"])
            if changes:
                world.world.apply(changes.pop(0))
        for number, read in enumerate(spec["reads"]):
            world.read(read, number=number)
        transaction.set_rollback(True)
