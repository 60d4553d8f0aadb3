from __future__ import annotations

import re
import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from agents.models import (
    AccessLog,
    Agent,
    ConsentRequest,
    ConsentRequestStatus,
    Conversation,
    MemoryProposal,
    Message,
)
from memories.models import Memory, MemoryParticipant
from people.models import ConsentStatus, Person


def agent_list(*, owner: AbstractBaseUser, only: Agent | None = None) -> QuerySet[Agent]:
    """The owner's agents; `only` narrows to one (an agent token sees itself, not its siblings)."""
    agents = Agent.objects.filter(owner=owner)
    if only is not None:
        agents = agents.filter(pk=only.pk)
    return agents


def agent_get(*, owner: AbstractBaseUser, agent_id: object, only: Agent | None = None) -> Agent:
    """The owner's agent, or 404 — another owner's agent does not exist for you."""
    if only is not None and isinstance(agent_id, uuid.UUID):
        # An agent token's own agent, loaded with the token in this request: what the
        # query below would return (that agent, if it is the one asked for and the
        # owner's), without building and running it on every chat turn.
        if only.pk != agent_id or only.owner_id != owner.pk:
            raise Http404("No Agent matches the given query.")
        return only
    return get_object_or_404(agent_list(owner=owner, only=only), pk=agent_id)


def agent_get_by_name(*, owner: AbstractBaseUser, name: str) -> Agent | None:
    return Agent.objects.filter(owner=owner, name__iexact=name.strip()).first()


def agent_list_with_counts(*, owner: AbstractBaseUser) -> QuerySet[Agent]:
    """The owner's agents for the agents page, each with its number of conversations."""
    return agent_list(owner=owner).annotate(conversation_count=Count("conversations"))


# --- chat ------------------------------------------------------------------------


def conversation_list(*, owner: AbstractBaseUser, agent: Agent) -> QuerySet[Conversation]:
    return Conversation.objects.filter(owner=owner, agent=agent)


def conversation_get(*, owner: AbstractBaseUser, agent: Agent, conversation_id: object) -> Conversation:
    """The owner's conversation with this agent, or 404 (another agent's is not found here either)."""
    return get_object_or_404(conversation_list(owner=owner, agent=agent), pk=conversation_id)


def message_list(*, conversation: Conversation) -> QuerySet[Message]:
    return conversation.messages.prefetch_related(
        Prefetch("cited_memories", queryset=Memory.objects.order_by("-occurred_at")),
        "withheld_people",
        Prefetch("memory_proposals", queryset=MemoryProposal.objects.prefetch_related("people")),
    )


def person_mentions_withheld(*, owner: AbstractBaseUser, text: str) -> list[Person]:
    """People named in `text` (name or alias, whole words, any case) whose memories agents cannot see.

    Only people without granted consent who are in at least one of the owner's
    memories (as a participant or as who told it): for anyone else there is
    nothing withheld to mention. This is an owner-side read of the people list;
    nothing from any memory is returned.
    """
    in_memories = Q(Exists(MemoryParticipant.objects.filter(person_id=OuterRef("pk")))) | Q(
        Exists(Memory.objects.filter(source_person_id=OuterRef("pk")))
    )
    candidates = (
        Person.objects.filter(in_memories, owner=owner, is_self=False)
        .exclude(consent_status=ConsentStatus.GRANTED)
        .order_by("display_name", "pk")
    )
    return [person for person in candidates if _names_appear(person, text)]


def _names_appear(person: Person, text: str) -> bool:
    for name in [person.display_name, *person.aliases]:
        name = name.strip()
        if name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, flags=re.IGNORECASE):
            return True
    return False


# --- consent requests and the access log -----------------------------------------


def consent_request_list_pending(*, owner: AbstractBaseUser, person: Person) -> QuerySet[ConsentRequest]:
    return ConsentRequest.objects.filter(
        owner=owner, person=person, status=ConsentRequestStatus.PENDING
    ).select_related("agent")


def consent_request_pending_person_ids(*, owner: AbstractBaseUser) -> set[object]:
    """Who already has a request waiting, so the chat shows "requested" instead of the button."""
    return set(
        ConsentRequest.objects.filter(owner=owner, status=ConsentRequestStatus.PENDING).values_list(
            "person_id", flat=True
        )
    )


def consent_request_get(*, owner: AbstractBaseUser, consent_request_id: object) -> ConsentRequest:
    return get_object_or_404(
        ConsentRequest.objects.filter(owner=owner).select_related("person", "agent"), pk=consent_request_id
    )


def access_log_list(*, owner: AbstractBaseUser, memory: Memory, limit: int = 50) -> list[AccessLog]:
    """Who has been handed this memory, newest first."""
    return list(
        AccessLog.objects.filter(owner=owner, memory=memory).select_related("agent", "viewer")[:limit]
    )
