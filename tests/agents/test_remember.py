"""Agents that remember (Ash): "remember that …" proposals, the owner's confirmation, the task, MCP and API.

Alice's journal (tests/agents/conftest.py): Bob (alias Bobby) has not consented, Carol has.
Nothing an agent proposes is saved until Alice confirms it; new people are created
(consent pending) only then. What an agent is told never depends on who exists.
"""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import TokenKind
from accounts.services import access_token_authenticate, access_token_create
from agents.mcpserver import tools
from agents.models import (
    AccessLog,
    Agent,
    ConsentRequest,
    ConsentRequestStatus,
    Conversation,
    MemoryProposal,
    MemoryProposalStatus,
    Message,
    MessageRole,
)
from agents.proposals import (
    memory_proposal_confirm,
    memory_proposal_create,
    memory_proposal_dismiss,
    proposal_new_names,
    remember_request,
)
from agents.services import chat_turn
from agents.tasks import propose_memories_from_conversation
from circles.models import CircleMembership, MembershipRole
from circles.services import circle_create, memory_share
from insights.models import InsightSource
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
REMEMBER = "remember that Carol and bobby love tulips, and Zed Quill brought some from Leeds"


def _send(client, journal, message: str, **extra):
    return client.post(reverse("agent_chat_send", args=[journal.caregiver.pk]), {"message": message}, **extra)


def _memory_count(alice) -> int:
    return Memory.objects.filter(owner=alice).count()


# --- recognising "remember that …" --------------------------------------------------------------
@pytest.mark.parametrize(
    "message, fact",
    [
        ("remember that Carol loves tulips", "Carol loves tulips"),
        ("Remember that carol loves tulips", "Carol loves tulips"),
        ("REMEMBER: Carol loves tulips.", "Carol loves tulips."),
        ("  remember:carol loves tulips", "Carol loves tulips"),
        ("remember that time we went to the park?", None),  # a question about memories
        ("Do you remember that Carol loves tulips", None),  # only at the start
        ("remember thatcher", None),
        ("remember that", None),
        ("What does Carol love?", None),
    ],
)
def test_remember_is_recognised_only_at_the_start(message, fact):
    assert remember_request(message) == fact


def test_people_are_matched_by_whole_name_or_alias_and_unknown_capitalised_names_proposed(alice, journal):
    proposal = memory_proposal_create(
        owner=alice, agent=journal.caregiver, text=REMEMBER[14:], surface="chat"
    )

    assert set(proposal.people.all()) == {journal.carol, journal.bob}
    assert proposal.new_people == ["Zed Quill"]  # not Leeds: a place
    assert proposal_new_names(owner=alice, text="Bobbyann met Carolyn on Monday in York") == [
        "Bobbyann",
        "Carolyn",
    ]
    assert (
        list(
            memory_proposal_create(
                owner=alice, agent=None, text="Bobbyann met Carolyn", surface="chat"
            ).people.all()
        )
        == []
    )


def test_kind_and_sensitivity_are_inferred_like_the_memory_form(alice, journal):
    taste = memory_proposal_create(owner=alice, agent=None, text="Carol loves tulips", surface="chat")
    therapy = memory_proposal_create(
        owner=alice, agent=None, text="Bob is seeing a therapist", surface="chat"
    )

    assert (taste.kind, taste.sensitivity) == ("preference", "personal")
    assert therapy.sensitivity == "sensitive"


# --- the web chat ------------------------------------------------------------------------------
def test_remember_in_the_chat_proposes_and_saves_nothing(alice_client, alice, journal, llm_stub):
    before = _memory_count(alice)

    response = _send(alice_client, journal, REMEMBER)

    proposal = MemoryProposal.objects.get(owner=alice)
    conversation = Conversation.objects.get(owner=alice)
    reply = conversation.messages.get(role=MessageRole.ASSISTANT)
    assert response.status_code == 302
    assert response["Location"] == reverse(
        "agent_conversation", args=[journal.caregiver.pk, conversation.pk]
    ) + (f"#message-{reply.pk}")
    assert (proposal.status, proposal.agent, proposal.conversation, proposal.message) == (
        MemoryProposalStatus.PENDING,
        journal.caregiver,
        conversation,
        reply,
    )
    assert proposal.text == "Carol and bobby love tulips, and Zed Quill brought some from Leeds"
    assert "Nothing is saved until you confirm it" in reply.content
    # Nothing saved, nobody created, no model asked, no memory handed to the agent.
    assert _memory_count(alice) == before
    assert not Person.objects.filter(owner=alice, display_name="Zed Quill").exists()
    assert llm_stub.requests == [] and not AccessLog.objects.exists()

    page = alice_client.get(response["Location"]).content.decode()
    assert f'id="proposal-{proposal.pk}"' in page
    assert "Zed Quill" in page and "consent pending" in page and "Save memory" in page


def test_remember_with_htmx_appends_the_turn_with_the_proposal_card(alice_client, alice, journal, offline):
    response = _send(alice_client, journal, "remember: Carol loves tulips", **HX)

    html = response.content.decode()
    proposal = MemoryProposal.objects.get(owner=alice)
    assert response.status_code == 200
    assert html.count('class="chat-message') == 2
    assert f'id="proposal-{proposal.pk}"' in html and "Carol" in html
    assert reverse("memory_proposal_confirm", args=[proposal.pk]) in html
    assert not Memory.objects.filter(body="Carol loves tulips").exists()


def test_a_secret_is_never_proposed(alice_client, alice, journal, offline):
    _send(alice_client, journal, "remember that the bank password: Tr0ub4dor&3x")

    reply = Message.objects.get(role=MessageRole.ASSISTANT)
    assert reply.content.startswith("I cannot remember that:") and "Nothing was saved." in reply.content
    assert not MemoryProposal.objects.exists()


def test_confirming_saves_the_memory_with_its_people_and_creates_new_people_pending(
    alice_client, alice, journal, offline
):
    _send(alice_client, journal, REMEMBER)
    proposal = MemoryProposal.objects.get()

    response = alice_client.post(reverse("memory_proposal_confirm", args=[proposal.pk]), {"next": "chat"})

    proposal.refresh_from_db()
    memory = proposal.memory
    zed = Person.objects.get(owner=alice, display_name="Zed Quill")
    assert response.status_code == 302
    assert (
        response["Location"]
        == reverse("agent_conversation", args=[journal.caregiver.pk, proposal.conversation_id])
        + f"#proposal-{proposal.pk}"
    )
    assert proposal.status == MemoryProposalStatus.CONFIRMED and proposal.decided_at is not None
    assert memory.body == proposal.text and memory.kind == "preference"
    assert set(memory.people.all()) == {journal.carol, journal.bob, zed}
    assert zed.consent_status == ConsentStatus.PENDING
    # Which agent proposed it stays on the proposal (Memory has no column for it).
    assert list(memory.agent_proposals.values_list("agent__name", flat=True)) == ["Caregiver"]

    again = alice_client.post(reverse("memory_proposal_confirm", args=[proposal.pk]), **HX)
    assert "already saved" in again.content.decode()
    assert Memory.objects.filter(body=proposal.text).count() == 1


def test_confirming_with_htmx_answers_the_saved_card(alice_client, alice, journal, offline):
    proposal = memory_proposal_create(
        owner=alice, agent=journal.caregiver, text="Carol loves tulips", surface="chat"
    )

    response = alice_client.post(reverse("memory_proposal_confirm", args=[proposal.pk]), **HX)

    html = response.content.decode()
    memory = Memory.objects.get(body="Carol loves tulips")
    assert html.lstrip().startswith(
        f'<div class="card proposal-card proposal-confirmed" id="proposal-{proposal.pk}"'
    )
    assert reverse("memory_detail", args=[memory.pk]) in html


def test_editing_in_place_with_htmx_swaps_form_and_card_and_saves_nothing(
    alice_client, alice, journal, offline
):
    _send(alice_client, journal, REMEMBER)
    proposal = MemoryProposal.objects.get()
    url = reverse("memory_proposal_edit", args=[proposal.pk])

    form = alice_client.get(url + "?next=chat", **HX).content.decode()
    assert form.lstrip().startswith("<form") and 'name="text"' in form and "Zed Quill" in form

    card = alice_client.post(
        url,
        {
            "next": "chat",
            "text": "Carol loves pink tulips",
            "kind": "preference",
            "sensitivity": "public",
            "people": [str(journal.carol.pk)],  # Bob unticked
            "new_people": [],  # Zed Quill unticked
            "add_new_person": "Yara",
            "save": "1",
        },
        **HX,
    ).content.decode()

    proposal.refresh_from_db()
    assert card.lstrip().startswith('<div class="card proposal-card proposal-pending"')
    assert proposal.text == "Carol loves pink tulips" and proposal.sensitivity == "public"
    assert list(proposal.people.all()) == [journal.carol] and proposal.new_people == ["Yara"]
    assert not Memory.objects.filter(body__contains="pink tulips").exists()
    assert not Person.objects.filter(owner=alice, display_name__in=["Yara", "Zed Quill"]).exists()

    cancel = alice_client.get(reverse("memory_proposal_detail", args=[proposal.pk]) + "?next=chat", **HX)
    assert f'id="proposal-{proposal.pk}"' in cancel.content.decode()


def test_editing_without_javascript_is_a_page_and_save_and_remember_confirms(
    alice_client, alice, journal, offline
):
    proposal = memory_proposal_create(
        owner=alice, agent=journal.caregiver, text="Carol loves tulips", surface="mcp"
    )
    url = reverse("memory_proposal_edit", args=[proposal.pk])

    page = alice_client.get(url)
    assert page.status_code == 200 and "<html" in page.content.decode()
    invalid = alice_client.post(url, {"text": "", "kind": "preference", "sensitivity": "personal"})
    assert invalid.status_code == 200 and "Write what to remember." in invalid.content.decode()

    response = alice_client.post(
        url,
        {
            "text": "Carol loves yellow tulips",
            "kind": "preference",
            "sensitivity": "personal",
            "people": [str(journal.carol.pk)],
            "add_person": str(journal.bob.pk),
            "and_confirm": "1",
        },
    )

    memory = Memory.objects.get(body="Carol loves yellow tulips")
    assert response.status_code == 302
    assert response["Location"] == reverse("memory_proposal_list") + f"#proposal-{proposal.pk}"
    assert set(memory.people.all()) == {journal.carol, journal.bob}


def test_dismissing_saves_nothing_plain_and_htmx(alice_client, alice, journal, offline):
    _send(alice_client, journal, REMEMBER)
    _send(alice_client, journal, "remember: Zed Quill likes jazz")
    first, second = MemoryProposal.objects.order_by("created_at")
    before = _memory_count(alice)

    plain = alice_client.post(reverse("memory_proposal_dismiss", args=[first.pk]))
    htmx = alice_client.post(reverse("memory_proposal_dismiss", args=[second.pk]), **HX)

    assert plain.status_code == 302 and plain["Location"].startswith(reverse("memory_proposal_list"))
    assert "nothing was saved" in htmx.content.decode()
    assert set(MemoryProposal.objects.values_list("status", flat=True)) == {MemoryProposalStatus.DISMISSED}
    assert _memory_count(alice) == before
    assert not Person.objects.filter(owner=alice, display_name="Zed Quill").exists()
    refused = alice_client.post(reverse("memory_proposal_confirm", args=[first.pk]))
    assert refused.status_code == 302 and _memory_count(alice) == before


def test_proposals_inbox_lists_what_waits_and_the_agents_page_links_to_it(
    alice_client, alice, journal, offline
):
    waiting = memory_proposal_create(
        owner=alice, agent=journal.caregiver, text="Carol loves tulips", surface="mcp"
    )
    done = memory_proposal_create(owner=alice, agent=journal.caregiver, text="Carol hums", surface="chat")
    memory_proposal_dismiss(proposal=done, actor=alice)

    inbox = alice_client.get(reverse("memory_proposal_list")).content.decode()
    agents = alice_client.get(reverse("agent_list")).content.decode()

    assert f'id="proposal-{waiting.pk}"' in inbox and "Waiting for you (1)" in inbox
    assert "Recently decided" in inbox and "Carol hums" in inbox
    assert reverse("memory_proposal_list") in agents and "1 waiting" in agents


def test_someone_elses_proposal_does_not_exist(mallory_client, alice, journal):
    proposal = memory_proposal_create(
        owner=alice, agent=journal.caregiver, text="Carol loves tulips", surface="chat"
    )

    for response in [
        mallory_client.post(reverse("memory_proposal_confirm", args=[proposal.pk])),
        mallory_client.post(reverse("memory_proposal_dismiss", args=[proposal.pk])),
        mallory_client.get(reverse("memory_proposal_edit", args=[proposal.pk])),
    ]:
        assert response.status_code == 404
    assert "Carol loves tulips" not in mallory_client.get(reverse("memory_proposal_list")).content.decode()
    proposal.refresh_from_db()
    assert proposal.status == MemoryProposalStatus.PENDING


# --- the API chat --------------------------------------------------------------------------------
def test_an_agent_tokens_remember_reply_is_the_same_whether_a_named_person_is_hidden_or_absent(
    alice, journal, offline
):
    _, raw = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=journal.caregiver)
    api = ApiClient(Client(), raw)
    url = reverse("api-agent-chat", args=[journal.caregiver.pk])

    def ask() -> dict:
        body = api.post(url, {"message": "remember that Bob and Zed like chess"}).json()
        return {
            "reply": body["reply"],
            "citations": body["citations"],
            "has_proposal": bool(body["proposal"]),
        }

    withheld = ask()
    # The owner sees whom the proposal names; the agent's reply does not say.
    assert list(MemoryProposal.objects.get().people.all()) == [journal.bob]
    Memory.objects.filter(pk=journal.chess.pk).delete()
    journal.bob.delete()
    absent = ask()

    assert withheld == absent and withheld["has_proposal"] is True
    assert "Bob" in withheld["reply"]  # the owner's words, echoed; nothing looked up
    assert not Memory.objects.filter(body__contains="like chess").exists()


# --- the task ------------------------------------------------------------------------------------
def test_the_task_proposes_fact_sentences_about_people_once_and_saves_nothing(alice, journal, offline):
    turn = chat_turn(
        owner=alice,
        agent=journal.caregiver,
        text="Carol loves red tulips. What does Bob like? Tell me about Carol. The weather was nice.",
    )
    chat_turn(
        owner=alice, agent=journal.caregiver, text="remember that Carol sings", conversation=turn.conversation
    )
    before = _memory_count(alice)

    first = propose_memories_from_conversation(str(turn.conversation.pk))
    again = propose_memories_from_conversation(str(turn.conversation.pk))
    chat_turn(
        owner=alice,
        agent=journal.caregiver,
        text="Bobby works as a carpenter. Carol loves red tulips.",
        conversation=turn.conversation,
    )
    later = propose_memories_from_conversation(str(turn.conversation.pk))

    assert (first, again, later) == (1, 0, 1)
    from_task = MemoryProposal.objects.filter(surface="task").order_by("created_at")
    assert [proposal.text for proposal in from_task] == [
        "Carol loves red tulips.",
        "Bobby works as a carpenter.",
    ]
    assert [list(proposal.people.all()) for proposal in from_task] == [[journal.carol], [journal.bob]]
    assert {proposal.status for proposal in from_task} == {MemoryProposalStatus.PENDING}
    assert _memory_count(alice) == before
    assert propose_memories_from_conversation(str(uuid.uuid4())) == 0


def test_suggest_button_queues_the_task_and_returns_to_the_chat(alice_client, alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Carol loves tulips.")

    response = alice_client.post(
        reverse("conversation_suggest_memories", args=[journal.caregiver.pk, turn.conversation.pk])
    )

    assert response.status_code == 302
    assert response["Location"] == reverse(
        "agent_conversation", args=[journal.caregiver.pk, turn.conversation.pk]
    )
    assert not MemoryProposal.objects.exists()  # the worker proposes; the page never saves


# --- MCP -----------------------------------------------------------------------------------------
@pytest.fixture
def token(alice, journal):
    _, raw = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=journal.caregiver)
    return access_token_authenticate(raw_token=raw)


def _without_id(answer: dict) -> dict:
    return {key: value for key, value in answer.items() if key != "proposal"}


def test_mcp_memory_propose_waits_for_the_owner_and_answers_the_same_whoever_is_named(alice, journal, token):
    named_hidden = tools.memory_propose(token=token, text="Bobby taught me draughts")
    named_nobody = tools.memory_propose(token=token, text="Quentin taught me draughts")
    named_consented = tools.memory_propose(token=token, text="Carol taught me draughts")

    assert _without_id(named_hidden) == _without_id(named_nobody) == _without_id(named_consented)
    assert named_hidden["status"] == "waiting_for_owner" and "owner confirms" in named_hidden["message"]
    proposal = MemoryProposal.objects.get(pk=named_hidden["proposal"])
    assert (proposal.surface, proposal.agent, list(proposal.people.all())) == (
        "mcp",
        journal.caregiver,
        [journal.bob],
    )
    assert not Memory.objects.filter(body__contains="taught me draughts").exists()
    with pytest.raises(tools.ToolInputError, match="text must not be empty"):
        tools.memory_propose(token=token, text="  ")


def test_mcp_insight_proposal_uses_only_memories_the_agent_may_see(alice, journal, token):
    hidden = tools.ToolInputError
    with pytest.raises(hidden) as gated:
        tools.memory_propose(
            token=token, text="Chess teaches patience.", from_memories=[str(journal.chess.pk)]
        )
    with pytest.raises(hidden) as missing:
        tools.memory_propose(token=token, text="Chess teaches patience.", from_memories=[str(uuid.uuid4())])
    assert str(gated.value) == str(missing.value) == "Memory not found."

    with pytest.raises(hidden, match="“Carol”"):
        tools.memory_propose(
            token=token, text="Carol's garden shows tulips like sun.", from_memories=[str(journal.tulips.pk)]
        )

    answer = tools.memory_propose(
        token=token, text="Red tulips brighten a garden in Leeds.", from_memories=[str(journal.tulips.pk)]
    )
    proposal = MemoryProposal.objects.get(pk=answer["proposal"])
    assert proposal.is_insight and list(proposal.sources.all()) == [journal.tulips]
    assert [warning for warning in answer["warnings"] if "Leeds" in warning]

    # The owner confirms it in the app, ticking the warnings: an insight with nobody in it.
    with pytest.raises(Exception, match="Check these details"):
        memory_proposal_confirm(proposal=proposal, actor=alice)
    keys = ["place:leeds"]
    insight = memory_proposal_confirm(proposal=proposal, actor=alice, confirmed_warnings=keys)
    assert insight.kind == "knowledge" and not insight.participants.exists()
    assert list(InsightSource.objects.filter(insight=insight).values_list("source_id", flat=True)) == [
        journal.tulips.pk
    ]


def test_mcp_consent_request_answers_the_same_whoever_it_is_about(alice, journal, token):
    erin = person_create(owner=alice, display_name="Erin")
    person_set_consent(person=erin, status=ConsentStatus.GRANTED, actor=alice)
    person_set_consent(person=erin, status=ConsentStatus.REVOKED, actor=alice)

    answers = {
        name: tools.consent_request(token=token, person_name=name, reason="To plan Bob's birthday")
        for name in ["Bob", "bobby", "Erin", "Carol", "Nobody Here", "Self"]
    }

    assert len({json.dumps(answer) for answer in answers.values()}) == 1
    requests = ConsentRequest.objects.filter(status=ConsentRequestStatus.PENDING)
    assert sorted(request.person.display_name for request in requests) == ["Bob", "Erin"]
    bob_request = requests.get(person=journal.bob)
    assert bob_request.agent == journal.caregiver
    assert bob_request.agent_reason == "Caregiver: “To plan Bob's birthday”"  # said once, though asked twice
    assert "To plan" not in bob_request.reason  # the reason a linked person may see is ours


def test_mcp_privacy_audit_answers_only_for_memories_the_agent_sees_and_lists_circles(alice, journal, token):
    from accounts.services import user_signup

    bob_user = user_signup(username="bob", password="correct horse battery")
    family = circle_create(owner=alice, name="Family")
    CircleMembership.objects.create(circle=family, user=bob_user, role=MembershipRole.MEMBER)
    me = Person.objects.get(owner=alice, is_self=True)
    solo = memory_create(
        owner=alice, body="I baked bread.", sensitivity="public", participants=[ParticipantSpec(person=me)]
    )
    memory_share(memory=solo, circle=family, by=alice)

    audit = tools.privacy_audit(token=token, memory_id=str(solo.pk))
    plain = tools.privacy_audit(token=token, memory_id=str(journal.tulips.pk))

    [circle] = audit["circles"]
    assert circle["circle"] == "Family"
    assert {member["member"]: member["can_see"] for member in circle["members"]} == {
        "alice": True,
        "bob": True,
    }
    assert plain["circles"] == [] and "shared into no circle" in plain["other_people"]
    errors = []
    for memory_id in [str(journal.chess.pk), str(uuid.uuid4())]:
        with pytest.raises(tools.ToolInputError) as error:
            tools.privacy_audit(token=token, memory_id=memory_id)
        errors.append(str(error.value))
    assert errors == ["Memory not found.", "Memory not found."]


# --- the API consent-requests endpoint --------------------------------------------------------------
def test_api_consent_requests_answer_identically_for_existing_hidden_consented_and_nobody(
    alice, mallory, journal
):
    theirs = person_create(owner=mallory, display_name="Bob")
    _, raw = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=journal.caregiver)
    api = ApiClient(Client(), raw)
    url = reverse("api-agent-consent-requests", args=[journal.caregiver.pk])

    bodies = [
        {"person_name": "Bob", "reason": "birthday"},
        {"person_name": "BOBBY"},
        {"person_name": "Carol"},
        {"person_name": "Nobody"},
        {"person": str(journal.bob.pk)},
        {"person": str(journal.carol.pk)},
        {"person": str(theirs.pk)},
        {"person": str(uuid.uuid4())},
    ]
    answers = {
        (response.status_code, response.content) for response in (api.post(url, body) for body in bodies)
    }

    assert len(answers) == 1
    [(status, content)] = answers
    assert status == 202 and "you will not be told the outcome" in json.loads(content)["detail"]
    assert list(ConsentRequest.objects.values_list("person__display_name", "agent_reason")) == [
        ("Bob", "Caregiver: “birthday”")
    ]


def test_api_consent_requests_need_a_person_and_only_the_tokens_own_agent(alice, journal):
    _, raw = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=journal.caregiver)
    api = ApiClient(Client(), raw)
    tutor = Agent.objects.get(owner=alice, name="Tutor")

    assert (
        api.post(reverse("api-agent-consent-requests", args=[tutor.pk]), {"person_name": "Bob"}).status_code
        == 404
    )
    empty = api.post(reverse("api-agent-consent-requests", args=[journal.caregiver.pk]), {"reason": "x"})
    assert empty.status_code == 400
    bad = api.post(
        reverse("api-agent-consent-requests", args=[journal.caregiver.pk]), {"person": "not-an-id"}
    )
    assert bad.status_code == 400
    assert not ConsentRequest.objects.exists()
