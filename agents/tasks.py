"""Celery tasks for agents: thin, take ids, call one service."""

from __future__ import annotations

import uuid

from celery import shared_task

from agents.proposals import memory_proposals_from_conversation
from memories.tasks import RETRY_OPTIONS


@shared_task(
    name="agents.propose_memories_from_conversation", soft_time_limit=60, time_limit=90, **RETRY_OPTIONS
)
def propose_memories_from_conversation(conversation_id: str) -> int:
    """Propose memories from the owner's messages in a finished conversation; returns how many.

    Proposals only: nothing is saved until the owner confirms. The service claims the
    messages it reads, so a redelivered task proposes nothing twice.
    """
    return len(memory_proposals_from_conversation(conversation_id=uuid.UUID(conversation_id)))
