from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from agents.citations import citation_source_ids, citations_save
from agents.llm import LLMError, chat_completion, llm_config
from agents.models import (
    AccessLog,
    AccessSurface,
    Agent,
    AgentRole,
    ConsentRequest,
    ConsentRequestStatus,
    Conversation,
    MemoryProposal,
    Message,
    MessageRole,
)
from agents.offline import offline_reply
from agents.prompt import chat_prompt
from agents.proposals import memory_proposal_from_chat, remember_request
from agents.selectors import agent_get_by_name, person_mentions_withheld
from memories.models import Memory, Sensitivity
from memories.retrieval import RelevanceCutoff, memory_search, question_relevance
from people.models import ConsentStatus, ConsentSurface, Person
from people.services import person_is_linked, person_set_consent

logger = logging.getLogger(__name__)

MAX_MESSAGE_LENGTH = 4000
MAX_INSTRUCTIONS_LENGTH = 4000
# Earlier questions (never replies; see agents/prompt.py) that give the model context.
EARLIER_QUESTIONS_IN_PROMPT = 6

BUILTIN_AGENTS: dict[str, tuple[str, str]] = {
    AgentRole.CAREGIVER: (
        "Caregiver",
        "You help the owner care for the people and pets in their life: remember "
        "needs, routines, appointments and preferences, and suggest kind, practical "
        "next steps.",
    ),
    AgentRole.REVIEWER: (
        "Reviewer",
        "You help the owner look back: summarise periods of their life, notice "
        "patterns and changes, and point to the memories that show them.",
    ),
    AgentRole.TUTOR: (
        "Tutor",
        "You help the owner learn from what they recorded: explain, quiz and connect what they know.",
    ),
    AgentRole.BRAINSTORM: (
        "Brainstorm",
        "You help the owner generate ideas — gifts, plans, projects — grounded in "
        "what their memories say people enjoy.",
    ),
}

# The guarantee is the consent gate, not this sentence; it keeps the model honest.
PRIVACY_INSTRUCTION = (
    "Use only the memories you are given. Do not guess or draw conclusions about people who are not in them."
)


def agent_create_builtins(*, owner: AbstractBaseUser) -> list[Agent]:
    agents = []
    for role, (name, instructions) in BUILTIN_AGENTS.items():
        agent, _ = Agent.objects.get_or_create(
            owner=owner,
            name=name,
            defaults={"role": role, "instructions": instructions, "is_builtin": True},
        )
        agents.append(agent)
    return agents


def access_log_record(
    *,
    owner: AbstractBaseUser,
    memories: Iterable[Memory],
    surface: str,
    agent: Agent | None = None,
    viewer: AbstractBaseUser | None = None,
) -> None:
    """One AccessLog row per memory handed out on `surface`, in one statement."""
    access_log_insert(
        [(memory.pk, owner.pk) for memory in memories], surface=surface, agent=agent, viewer=viewer
    )


def access_log_insert(
    handed: list[tuple[object, int]],
    *,
    surface: str,
    agent: Agent | None = None,
    viewer: AbstractBaseUser | None = None,
) -> None:
    """AccessLog rows for (memory id, its owner's id) pairs, in their order, in one statement.

    Plain SQL, one round trip: bulk_create wraps its INSERT … RETURNING in a
    transaction of its own (three round trips) and builds a model per row, on the
    path of every agent search (~1 ms of a ~20 ms request).
    """
    if not handed:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {AccessLog._meta.db_table} "
            "(owner_id, memory_id, surface, agent_id, agent_name, viewer_id, created_at) "
            "SELECT handed.owner_id, handed.memory_id, %s, %s, %s, %s, %s "
            "FROM unnest(%s::uuid[], %s::bigint[]) WITH ORDINALITY AS handed (memory_id, owner_id, position) "
            "ORDER BY position",
            [
                surface,
                agent.pk if agent is not None else None,
                agent.name if agent is not None else "",
                viewer.pk if viewer is not None else None,
                timezone.now(),
                [memory_id for memory_id, _ in handed],
                [owner_id for _, owner_id in handed],
            ],
        )


# --- custom agents ---------------------------------------------------------------


def _clean_agent_fields(
    *, owner: AbstractBaseUser, name: str, instructions: str, agent: Agent | None
) -> tuple[str, str]:
    name = (name or "").strip()
    instructions = (instructions or "").strip()
    errors: dict[str, str] = {}
    if not name:
        errors["name"] = "Give the agent a name."
    elif len(name) > 100:
        errors["name"] = "Names are at most 100 characters."
    else:
        existing = agent_get_by_name(owner=owner, name=name)
        if existing is not None and (agent is None or existing.pk != agent.pk):
            errors["name"] = f"You already have an agent called {existing.name}."
    if not instructions:
        errors["instructions"] = "Tell the agent what it is for."
    elif len(instructions) > MAX_INSTRUCTIONS_LENGTH:
        errors["instructions"] = f"Instructions are at most {MAX_INSTRUCTIONS_LENGTH} characters."
    if errors:
        raise ValidationError(errors)
    return name, instructions


def _refuse_builtin(agent: Agent) -> None:
    if agent.is_builtin:
        raise ValidationError(f"{agent.name} is a built-in agent: it cannot be changed or deleted.")


def agent_create(*, owner: AbstractBaseUser, name: str, instructions: str) -> Agent:
    name, instructions = _clean_agent_fields(owner=owner, name=name, instructions=instructions, agent=None)
    try:
        with transaction.atomic():
            return Agent.objects.create(
                owner=owner, name=name, instructions=instructions, role=AgentRole.CUSTOM
            )
    except IntegrityError as error:
        # Two tabs creating the same name at once: the constraint decides.
        raise ValidationError({"name": f"You already have an agent called {name}."}) from error


def agent_update(*, agent: Agent, name: str, instructions: str) -> Agent:
    _refuse_builtin(agent)
    name, instructions = _clean_agent_fields(
        owner=agent.owner, name=name, instructions=instructions, agent=agent
    )
    agent.name = name
    agent.instructions = instructions
    try:
        with transaction.atomic():
            agent.save(update_fields=["name", "instructions"])
    except IntegrityError as error:
        raise ValidationError({"name": f"You already have an agent called {name}."}) from error
    return agent


def agent_set_sensitive_clearance(*, agent: Agent, may_read_sensitive: bool) -> Agent:
    """Whether `agent` may read sensitive memories (SPEC §3); built-in agents too: it is the owner's call."""
    if not isinstance(may_read_sensitive, bool):
        raise ValidationError({"may_read_sensitive": "Say true or false."})
    agent.may_read_sensitive = may_read_sensitive
    agent.save(update_fields=["may_read_sensitive"])
    return agent


def agent_delete(*, agent: Agent) -> None:
    """Delete a custom agent with its conversations and tokens; its access log stays (by name)."""
    _refuse_builtin(agent)
    agent.delete()


# --- one chat turn ---------------------------------------------------------------


@dataclass(frozen=True)
class ChatTurn:
    conversation: Conversation
    question: Message
    reply: Message
    memories: list[Memory] = field(default_factory=list)
    withheld_people: list[Person] = field(default_factory=list)
    # Set when the message was "remember that …": the reply proposes a memory instead of answering.
    proposal: MemoryProposal | None = None


def _title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 60 else line[:60].rsplit(" ", 1)[0] + "…"


def _names(people: list[Person]) -> str:
    names = [person.display_name for person in people]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def consent_notice(people: list[Person]) -> str:
    """What the reply tells the owner about withheld people: who, never what.

    For the owner's eyes only: it is added to the reply after the model answered, so
    it is never in a prompt, and a turn asked by the agent itself gets none (see chat_turn).
    """
    if not people:
        return ""
    subject = "they have" if len(people) > 1 else f"{people[0].display_name} has"
    return (
        f"Memories involving {_names(people)} are not available to agents because {subject} not consented. "
        "You can ask for their consent; only you can record it."
    )


def _question_embedding(question: str) -> list[float] | None:
    try:
        from memories.embeddings import embed_text

        return embed_text(question)
    except Exception:
        logger.warning("Question embedding unavailable; the chat searches by full text only.", exc_info=True)
        return None


def agent_chat_memories(
    *,
    owner: AbstractBaseUser,
    question: str,
    relevance: RelevanceCutoff | None = None,
    question_embedding: list[float] | None = None,
    may_read_sensitive: bool = False,
) -> list[Memory]:
    """The memories the agent may use for `question`: THE consent gate, then the relevance cut-off.

    A question is not a search query: "what happened in the park?" should find a
    memory that only mentions the park. Full text gets the question's words ORed
    (websearch syntax, stop words dropped by PostgreSQL); meaning is matched on
    the question as asked. Only the memories the question needs reach the agent
    (question_relevance): none at all when nothing is relevant. `may_read_sensitive`:
    the agent's clearance for sensitive memories (Agent.may_read_sensitive). `relevance` and
    `question_embedding` are for the relevance bench (bench_relevance).
    """
    words = [word for word in dict.fromkeys(re.findall(r"\w+", question.lower())) if word != "or"]
    terms = " or ".join(words) or question
    hits = memory_search(
        owner,
        terms,
        respect_consent=True,
        limit=settings.AGENT_CHAT_MEMORY_LIMIT,
        query_embedding=question_embedding or _question_embedding(question),
        relevance=relevance or question_relevance(),
        may_read_sensitive=may_read_sensitive,
    )
    return [hit.memory for hit in hits]


def sensitive_kept_back(
    *, owner: AbstractBaseUser, question: str, question_embedding: list[float] | None
) -> int:
    """How many sensitive memories an uncleared agent was not given for `question`: a count for
    the owner's copy of the reply, never for a prompt (the same search, with the clearance)."""
    cleared = agent_chat_memories(
        owner=owner, question=question, question_embedding=question_embedding, may_read_sensitive=True
    )
    return sum(memory.sensitivity == Sensitivity.SENSITIVE for memory in cleared)


def sensitive_notice(count: int) -> str:
    """What the owner's copy of a reply says about sensitive memories kept back: how many, never which."""
    if not count:
        return ""
    memories = "memory was" if count == 1 else "memories were"
    return (
        f"{count} sensitive {memories} kept back: this agent may not read sensitive memories "
        "(health, money, …). You can allow it on the agent's page."
    )


def conversation_create(*, owner: AbstractBaseUser, agent: Agent, title: str = "") -> Conversation:
    if agent.owner_id != owner.pk:
        raise ValidationError({"agent": "Unknown agent."})
    return Conversation.objects.create(owner=owner, agent=agent, title=title.strip()[:200])


def agent_reply(
    *, memories: list[Memory], question: str, asker: AbstractBaseUser | None = None, **prompt: Any
) -> tuple[str, bool]:
    """(the agent's answer, whether it is an error): the model's, or the offline reply when none is set.

    `prompt` is the rest of what chat_prompt takes (agent, privacy_instruction,
    earlier_questions), built only when a model is set. `asker` is the circle member
    asking a circle's agent (the offline reply then names whose each memory is); None
    in the owner's own chat. A model that fails answers with an error to retry: the
    question is already saved.
    """
    config = llm_config()
    if config is None:
        return offline_reply(question=question, memories=memories, attribute_owners=asker is not None), False
    messages = chat_prompt(memories=memories, question=question, asker=asker, **prompt)
    try:
        return chat_completion(config=config, messages=messages), False
    except LLMError as error:
        return f"{error} Your message is saved: send it again to retry.", True


def chat_turn(
    *,
    owner: AbstractBaseUser,
    agent: Agent,
    text: str,
    conversation: Conversation | None = None,
    surface: str = AccessSurface.CHAT,
    asked_by_agent: bool = False,
) -> ChatTurn:
    """Ask `agent` one question: gated retrieval, prompt, LLM (or offline), both messages saved.

    The question is committed before the model is called, so a timeout or an
    error loses nothing: the failure is saved as an assistant message flagged
    `is_error`. Every memory handed to the agent gets an AccessLog row.

    `asked_by_agent` is true when the caller is the agent itself (its own token), not
    the owner. Then nothing about withheld people is looked up or said: the notice
    would confirm to the agent that someone it named exists and has not consented. The
    reply depends only on what the gate let through, so it is the same whether a person
    named in the question is withheld or does not exist at all.
    """
    text = (text or "").strip()
    if not text:
        raise ValidationError({"message": "Write a message first."})
    if len(text) > MAX_MESSAGE_LENGTH:
        raise ValidationError({"message": f"Messages are at most {MAX_MESSAGE_LENGTH} characters."})
    if agent.owner_id != owner.pk:
        raise ValidationError({"agent": "Unknown agent."})
    if conversation is not None and (conversation.owner_id != owner.pk or conversation.agent_id != agent.pk):
        raise ValidationError({"conversation": "Unknown conversation."})
    if surface not in AccessSurface.values:
        raise ValidationError({"surface": "Unknown surface."})

    with transaction.atomic():
        if conversation is None:
            conversation = Conversation.objects.create(owner=owner, agent=agent, title=_title_from(text))
        question = Message.objects.create(conversation=conversation, role=MessageRole.USER, content=text)
    fact = remember_request(text)
    if fact is not None:
        # No retrieval and no model: the agent proposes a memory for the owner to confirm.
        proposal, reply = memory_proposal_from_chat(
            owner=owner, agent=agent, conversation=conversation, fact=fact, surface=surface
        )
        return ChatTurn(conversation=conversation, question=question, reply=reply, proposal=proposal)
    earlier_questions = list(
        conversation.messages.filter(role=MessageRole.USER, created_at__lte=question.created_at)
        .exclude(pk=question.pk)
        .order_by("-created_at")
        .values_list("content", flat=True)[:EARLIER_QUESTIONS_IN_PROMPT]
    )[::-1]

    question_embedding = _question_embedding(text)
    memories = agent_chat_memories(
        owner=owner,
        question=text,
        question_embedding=question_embedding,
        may_read_sensitive=agent.may_read_sensitive,
    )
    access_log_record(owner=owner, memories=memories, surface=surface, agent=agent)
    withheld = [] if asked_by_agent else person_mentions_withheld(owner=owner, text=text)
    # As for withheld people: the owner is told, an agent asking for itself is not.
    kept_back = (
        0
        if asked_by_agent or agent.may_read_sensitive
        else sensitive_kept_back(owner=owner, question=text, question_embedding=question_embedding)
    )

    # No transaction is open here (unless a caller opened one): a slow model must
    # not hold database locks.
    content, is_error = agent_reply(
        agent=agent,
        privacy_instruction=PRIVACY_INSTRUCTION,
        memories=memories,
        earlier_questions=earlier_questions,
        question=text,
    )
    if is_error:
        withheld, kept_back = [], 0
    for notice in (consent_notice(withheld), sensitive_notice(kept_back)):
        if notice:
            content = f"{content}\n\n{notice}"

    with transaction.atomic():
        reply = Message.objects.create(
            conversation=conversation,
            role=MessageRole.ASSISTANT,
            content=content,
            is_error=is_error,
            source_ids=[] if is_error else citation_source_ids(memories),
        )
        if not is_error:
            citations_save(message=reply, memories=memories, new=True)
        if withheld:  # a reply just created has none to clear
            reply.withheld_people.set(withheld)
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    return ChatTurn(
        conversation=conversation,
        question=question,
        reply=reply,
        memories=[] if is_error else memories,
        withheld_people=withheld,
    )


def chat_retry(*, owner: AbstractBaseUser, reply: Message) -> tuple[ChatTurn, list]:
    """Ask again a question whose reply failed: the failed reply and its question give way to a new turn.

    Returns the new turn and the ids of the two messages it replaced.

    Only an error reply (`is_error`, no memories cited) can be retried, so nothing an
    agent was given disappears: the access log keeps every hand-over, and the retry
    logs its own.
    """
    conversation = reply.conversation
    if conversation.owner_id != owner.pk or reply.role != MessageRole.ASSISTANT or not reply.is_error:
        raise ValidationError({"message": "Only a reply that failed can be retried."})
    question = (
        conversation.messages.filter(role=MessageRole.USER, created_at__lte=reply.created_at)
        .order_by("-created_at", "-id")
        .first()
    )
    if question is None:
        raise ValidationError({"message": "There is no question to ask again."})
    text = question.content
    with transaction.atomic():
        Message.objects.filter(pk__in=[question.pk, reply.pk]).delete()
    turn = chat_turn(owner=owner, agent=conversation.agent, text=text, conversation=conversation)
    return turn, [question.pk, reply.pk]


def conversation_delete(*, owner: AbstractBaseUser, conversation: Conversation) -> None:
    """Delete a conversation and its messages. The access log is an audit and stays whole.

    AccessLog rows name the memory, agent and time, not the conversation, so no
    cascade reaches them; consent requests and memory proposals made from it keep
    their own rows (their link to the conversation is cleared).
    """
    if conversation.owner_id != owner.pk:
        raise ValidationError({"conversation": "Unknown conversation."})
    conversation.delete()


# --- consent requests (agents suggest; only the owner decides) -----------------------


def consent_request_create(
    *,
    owner: AbstractBaseUser,
    person: Person,
    agent: Agent | None = None,
    conversation: Conversation | None = None,
) -> ConsentRequest:
    """Ask the owner to seek `person`'s consent. One pending request per person: asking again reuses it.

    A person linked to their own account decides for themself: the request is theirs
    to answer (on My consents), and they are told of it; the owner only waits.
    """
    if person.owner_id != owner.pk or (agent is not None and agent.owner_id != owner.pk):
        raise ValidationError({"person": "Unknown person."})
    if conversation is not None and conversation.owner_id != owner.pk:
        raise ValidationError({"conversation": "Unknown conversation."})
    if person.is_self or person.consent_status == ConsentStatus.GRANTED:
        raise ValidationError({"person": f"{person.display_name} has already consented."})
    existing = ConsentRequest.objects.filter(person=person, status=ConsentRequestStatus.PENDING).first()
    if existing is not None:
        return existing
    when = timezone.localtime().strftime("%d %B %Y")
    reason = (
        f"{agent.name} was asked about {person.display_name} on {when}."
        if agent is not None
        else f"An agent was asked about {person.display_name} on {when}."
    )
    try:
        with transaction.atomic():
            created = ConsentRequest.objects.create(
                owner=owner, person=person, agent=agent, conversation=conversation, reason=reason
            )
    except IntegrityError:
        # Another request for this person was created at the same moment: use it.
        return ConsentRequest.objects.get(person=person, status=ConsentRequestStatus.PENDING)
    if person_is_linked(person):
        _notify_linked_person(consent_request=created, owner=owner)
    return created


def _notify_linked_person(*, consent_request: ConsentRequest, owner: AbstractBaseUser) -> None:
    # Only what the person may know: whose agent asked, and that it is about them. No memory text.
    # It stays with the request's creation: the person answers in linked/ (My consents,
    # linked.services.consent_request_answer_by_person), which builds on agents, not the other way.
    from inbox.models import NotificationKind
    from inbox.services import notify

    agent = consent_request.agent
    who = f"{owner.get_username()}'s agent" + (f" {agent.name}" if agent is not None else "")
    notify(
        recipient=consent_request.person.linked_user_id,
        kind=NotificationKind.CONSENT_REQUEST,
        text=f"{who} asks for your consent to use memories about you. You decide on My consents.",
        url=reverse("my_consents"),
    )


def _resolve(*, consent_request: ConsentRequest, actor: AbstractBaseUser, status: str) -> ConsentRequest:
    if actor.pk != consent_request.owner_id:
        raise ValidationError("Only the owner can answer a consent request.")
    return consent_request_close(consent_request=consent_request, status=status)


def consent_request_close(*, consent_request: ConsentRequest, status: str) -> ConsentRequest:
    """Close a pending request (the owner's answer, or the linked person's in linked.services)."""
    locked = ConsentRequest.objects.select_for_update().get(pk=consent_request.pk)
    if locked.status != ConsentRequestStatus.PENDING:
        raise ValidationError(f"This request was already {locked.get_status_display().lower()}.")
    locked.status = status
    locked.resolved_at = timezone.now()
    locked.save(update_fields=["status", "resolved_at"])
    consent_request.status = locked.status
    consent_request.resolved_at = locked.resolved_at
    return consent_request


@transaction.atomic
def consent_request_approve(*, consent_request: ConsentRequest, actor: AbstractBaseUser) -> ConsentRequest:
    """The owner records that the person consented: the same consent change as the person page."""
    _resolve(consent_request=consent_request, actor=actor, status=ConsentRequestStatus.APPROVED)
    who = consent_request.agent.name if consent_request.agent is not None else "an agent"
    person_set_consent(
        person=consent_request.person,
        status=ConsentStatus.GRANTED,
        actor=actor,
        surface=ConsentSurface.UI,
        reason=f"Approved a consent request from {who}.",
    )
    return consent_request


@transaction.atomic
def consent_request_dismiss(*, consent_request: ConsentRequest, actor: AbstractBaseUser) -> ConsentRequest:
    return _resolve(consent_request=consent_request, actor=actor, status=ConsentRequestStatus.DISMISSED)
