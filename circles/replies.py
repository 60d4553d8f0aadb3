"""A circle's conversation as one reader may read it now: each stored reply is gated like its sources.

SPEC §3, "What is made from a memory is gated like the memory": a reply the circle's
agent wrote from memories keeps their ids (`CircleMessage.source_ids`, which a deleted
memory does not empty), and on every read it is shown to a reader only if every one of
those memories is visible to that reader now. Whether they are is asked of the one
gate, `circle_visible_memories`, for that reader alone: the member's own view, where
the owner of a memory keeps seeing it. Anything else — a source unshared, someone in it
no longer granted for the circle, its owner gone, its sensitivity raised, the memory
deleted, or a reader who joined later and was never allowed it — turns the reply into
a placeholder naming no person, memory, circle or count. Nothing here decides
visibility: it asks the gate and compares sets.

A question a member typed has no sources and stays: it is theirs. The shared
conversation's readers are its current members, each checked for themself; a private
conversation's one reader is checked too. Every surface that shows a circle's
conversation reads it here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied

from agents.citations import citations_attach
from circles.models import CircleConversation, CircleMembership, CircleMessage
from memories.gate import circle_sources_visible, derived_text_shown

REPLY_WITHHELD = "This reply drew on a memory that is no longer shared with you."


@dataclass(frozen=True)
class ConversationForReader:
    # Oldest first. Each has `citations` ([1] first) and `withheld`; a withheld reply's
    # content is REPLY_WITHHELD and it cites nothing.
    messages: list[CircleMessage]
    # The sources this reader may open now: every citation of a reply that is shown.
    citable: set[uuid.UUID]


def circle_messages_for_reader(
    *, conversation: CircleConversation, reader: AbstractBaseUser
) -> ConversationForReader:
    """The conversation's messages as `reader` may read them now, asked of the gate on every call.

    Raises PermissionDenied for anyone who may not read the conversation at all: a
    non-member, or another member's private conversation.
    """
    if conversation.private_to_id is not None and conversation.private_to_id != reader.pk:
        raise PermissionDenied("This conversation is private to another member.")
    if not CircleMembership.objects.filter(circle_id=conversation.circle_id, user_id=reader.pk).exists():
        raise PermissionDenied("Only members read the circle's conversations.")
    messages = list(conversation.messages.select_related("author"))
    sources = {source for message in messages for source in message.source_ids}
    visible = circle_sources_visible(conversation.circle_id, reader.pk, sources)
    shown = []
    for message in messages:
        message.withheld = not derived_text_shown(message.source_ids, visible)
        if message.withheld:
            message.content = REPLY_WITHHELD
            message.citations = []
        else:
            shown.append(message)
    # Only the replies shown load their cited memories: a withheld one's are never read.
    citations_attach(shown)
    return ConversationForReader(messages=messages, citable=visible)
