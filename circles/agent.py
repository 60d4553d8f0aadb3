"""The circle's agent: one chat turn answered from what EVERY reader of the reply may see.

The viewer set is read fresh on every turn from the circle's memberships:
- the shared conversation is read by every current member (and by whoever joins
  later), so its viewers are all current members and `sensitive` memories never
  enter it (read_by_several);
- a private conversation is read by one member alone (Ash's DM disclosure): its
  viewer set is that member, so memories about them — personal ones, and
  sensitive ones where they are the subject — may be used.
The memories come from memories.retrieval.circle_memory_search with for_agent=True
(expired and replaced memories are for members, not agents): the gate computes the
intersection in SQL. Nothing here filters or decides visibility. The replies it
stores keep their sources' ids and are read back, reader by reader, through
circles/replies.py.
"""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.citations import citations_save
from agents.models import AccessLog, AccessSurface, Agent, AgentRole
from agents.services import (
    BUILTIN_AGENTS,
    MAX_INSTRUCTIONS_LENGTH,
    MAX_MESSAGE_LENGTH,
    PRIVACY_INSTRUCTION,
    agent_reply,
)
from circles.models import Circle, CircleConversation, CircleMembership, CircleMessage
from memories.models import Memory
from memories.retrieval import circle_memory_search, question_relevance

logger = logging.getLogger(__name__)

CIRCLE_AGENT_ROLES = [AgentRole.CAREGIVER, AgentRole.REVIEWER, AgentRole.TUTOR, AgentRole.BRAINSTORM]
CIRCLE_PRIVACY_INSTRUCTION = (
    PRIVACY_INSTRUCTION + " Several people may read your reply: never guess at or hint about anything "
    "beyond the memories given."
)


def circle_agent(circle: Circle) -> Agent:
    """An unsaved Agent describing the circle's agent (name and instructions) for the prompt."""
    name, instructions = BUILTIN_AGENTS.get(circle.agent_role, BUILTIN_AGENTS[AgentRole.CAREGIVER])
    if circle.agent_instructions.strip():
        instructions = circle.agent_instructions.strip()
    instructions = (
        f"{instructions} You are the agent of the circle “{circle.name}”, shared by its members; "
        '"you" in a memory means the member who recorded it, named as its owner.'
    )
    return Agent(name=f"{circle.name} {name}", role=circle.agent_role, instructions=instructions)


def circle_agent_update(
    *, circle: Circle, by: AbstractBaseUser, role: str, instructions: str, may_read_sensitive: bool = False
) -> Circle:
    """The circle's agent's role, instructions and clearance for sensitive memories (the owner's)."""
    if circle.owner_id != by.pk:
        raise PermissionDenied("Only the circle's owner can set up its agent.")
    instructions = (instructions or "").strip()
    errors = {}
    if role not in CIRCLE_AGENT_ROLES:
        errors["role"] = "Choose one of the four roles."
    if len(instructions) > MAX_INSTRUCTIONS_LENGTH:
        errors["instructions"] = f"Instructions are at most {MAX_INSTRUCTIONS_LENGTH} characters."
    if errors:
        raise ValidationError(errors)
    circle.agent_role, circle.agent_instructions = role, instructions
    circle.agent_may_read_sensitive = may_read_sensitive
    circle.save(update_fields=["agent_role", "agent_instructions", "agent_may_read_sensitive", "updated_at"])
    return circle


def circle_conversation(*, circle: Circle, user: AbstractBaseUser, private: bool) -> CircleConversation:
    """The circle's shared conversation, or the user's private one (created on first use)."""
    if not CircleMembership.objects.filter(circle=circle, user=user).exists():
        raise PermissionDenied("Only members talk to the circle's agent.")
    lookup = {"circle": circle, "private_to": user if private else None}
    conversation = CircleConversation.objects.filter(**lookup).first()
    if conversation is not None:
        return conversation
    try:
        with transaction.atomic():
            return CircleConversation.objects.create(started_by=user, **lookup)
    except IntegrityError:  # created at the same moment by another request
        return CircleConversation.objects.get(**lookup)


def circle_viewers(*, conversation: CircleConversation) -> list[int]:
    """Who reads this conversation's replies, now: one member, or every current member."""
    if conversation.private_to_id is not None:
        return [conversation.private_to_id]
    return sorted(
        CircleMembership.objects.filter(circle_id=conversation.circle_id).values_list("user_id", flat=True)
    )


def _question_terms(question: str) -> str:
    words = [word for word in dict.fromkeys(re.findall(r"\w+", question.lower())) if word != "or"]
    return " or ".join(words) or question


def _question_embedding(question: str) -> list[float] | None:
    try:
        from memories.embeddings import embed_text

        return embed_text(question)
    except Exception:
        logger.warning(
            "Question embedding unavailable; the circle chat searches by full text only.", exc_info=True
        )
        return None


def circle_chat_memories(*, conversation: CircleConversation, question: str) -> list[Memory]:
    """The memories this reply may use: THE gate, for this conversation's viewer set, then only
    those relevant to the question (question_relevance: none when nothing is)."""
    viewers = circle_viewers(conversation=conversation)
    hits = circle_memory_search(
        conversation.circle_id,
        viewers,
        _question_terms(question),
        limit=settings.AGENT_CHAT_MEMORY_LIMIT,
        query_embedding=_question_embedding(question),
        for_agent=True,
        read_by_several=conversation.private_to_id is None,
        may_read_sensitive=conversation.circle.agent_may_read_sensitive,
        relevance=question_relevance(),
    )
    return [hit.memory for hit in hits]


def circle_chat_turn(*, conversation: CircleConversation, user: AbstractBaseUser, text: str) -> CircleMessage:
    """One question to the circle's agent; both messages saved; every memory handed over logged."""
    text = (text or "").strip()
    if not text:
        raise ValidationError({"message": "Write a message first."})
    if len(text) > MAX_MESSAGE_LENGTH:
        raise ValidationError({"message": f"Messages are at most {MAX_MESSAGE_LENGTH} characters."})
    if not CircleMembership.objects.filter(circle_id=conversation.circle_id, user=user).exists():
        raise PermissionDenied("Only members talk to the circle's agent.")
    if conversation.private_to_id is not None and conversation.private_to_id != user.pk:
        raise PermissionDenied("This conversation is private to another member.")
    circle = Circle.objects.get(pk=conversation.circle_id)
    CircleMessage.objects.create(
        conversation=conversation, author=user, role=CircleMessage.Role.USER, content=text
    )
    memories = circle_chat_memories(conversation=conversation, question=text)
    agent = circle_agent(circle)
    AccessLog.objects.bulk_create(
        AccessLog(
            owner_id=memory.owner_id,
            memory_id=memory.pk,
            surface=AccessSurface.CIRCLE,
            agent_name=agent.name[:100],
            viewer=user,
        )
        for memory in memories
    )
    content, is_error = agent_reply(
        agent=agent,
        privacy_instruction=CIRCLE_PRIVACY_INSTRUCTION,
        memories=memories,
        earlier_questions=[],
        question=text,
        asker=user,
    )
    with transaction.atomic():
        reply = CircleMessage.objects.create(
            conversation=conversation, role=CircleMessage.Role.ASSISTANT, content=content, is_error=is_error
        )
        if not is_error:
            citations_save(message=reply, memories=memories)
        CircleConversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    return reply
