"""A second opinion on an inferred memory kind, from the configured LLM.

When the owner leaves the kind to Keepsake, memories.lifecycle picks one with
readable rules at save time, so the memory is usable (and its expiry known) at
once. If an OpenAI-compatible LLM is configured (LLM_BASE_URL, agents/llm.py)
and MEMORY_KIND_LLM is on (it is off by default), the save also queues
memories.tasks.infer_kind_with_llm, which asks the LLM for one kind and stores
it only if nothing was saved since:

- Only text the owner's agents may already read goes to the LLM: a memory that
  is `sensitive`, or that the consent gate (memories.retrieval.agent_visible_memories)
  hides from agents, is never sent, whatever MEMORY_KIND_LLM says. The check runs
  at save time (nothing is queued) and again in the task right before the call,
  on fresh rows, since consent or sensitivity may have changed in between.
- Queued only by a save that inferred the kind (kind None or "" given to
  memory_create / memory_update). An explicit kind never reaches the LLM, and an
  edit that keeps the kind shown on the form is an explicit choice too: there is
  no "was inferred" flag on the row, on purpose (the owner saw the kind and kept it).
- Applied with one conditional UPDATE keyed on the save's updated_at and on the
  title, body and kind the task read: any later save by the owner (a new text,
  an explicit kind, even a re-save) wins, and a redelivered task changes nothing.
- Anything the LLM says that is not exactly one kind, a timeout or an error
  leaves the rules' kind in place (logged without the memory's text).
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from functools import partial

from django.conf import settings
from django.db import transaction

from agents.llm import LLMError, chat_completion, llm_config
from memories.gate import agent_visible_memories
from memories.lifecycle import memory_apply_expiry
from memories.models import Memory, MemoryKind, Sensitivity

logger = logging.getLogger(__name__)

KIND_DEFINITIONS = {
    MemoryKind.PREFERENCE: "a like, dislike or taste",
    MemoryKind.IDENTITY: "who someone is: name, birth, origin, job, pronouns",
    MemoryKind.RELATIONSHIP: "how people are related or connected",
    MemoryKind.KNOWLEDGE: "a lasting fact that fits none of the others",
    MemoryKind.CONTEXT: "what is going on right now, true for a few days",
    MemoryKind.EVENT: "something that happened at a particular time",
    MemoryKind.TASK: "a reminder or something to do",
    MemoryKind.OBSERVATION: "something noticed in passing",
}

KIND_PROMPT = (
    "You classify one entry of a personal memory journal. Reply with exactly one word, "
    "the kind that fits best, in lower case, and nothing else. The kinds:\n"
    + "\n".join(f"{kind}: {meaning}" for kind, meaning in KIND_DEFINITIONS.items())
)

# Tolerated around the single word: models like to add a full stop or quotes.
_DECORATION = " \t\r\n.,;:!\"'`*"


def kind_llm_enabled() -> bool:
    return bool(settings.MEMORY_KIND_LLM) and llm_config() is not None


def kind_llm_may_read(*, memory_id: uuid.UUID, owner_id: int, sensitivity: str) -> bool:
    """Whether this memory's text may go to the LLM: never when sensitive or hidden from agents.

    The LLM is an outside service, so it gets no more than the owner's agents
    would: the same consent gate (pending or revoked people, expiry, replaced
    memories) decides, plus sensitivity, which the gate leaves to the owner.
    """
    if sensitivity == Sensitivity.SENSITIVE:
        return False
    return agent_visible_memories(owner_id).filter(pk=memory_id).exists()


def parse_kind_reply(reply: str) -> str | None:
    """The kind named by a one-word reply, or None for anything else (sentences, unknown words)."""
    word = reply.strip(_DECORATION).lower()
    return word if word in MemoryKind.values else None


def llm_classify_kind(*, title: str, body: str) -> str | None:
    """Ask the LLM for the memory's kind; None when it is off, fails or answers badly."""
    config = llm_config()
    if config is None:
        return None
    text = f"{title}\n\n{body}" if title else body
    try:
        reply = chat_completion(
            config=config,
            messages=[{"role": "system", "content": KIND_PROMPT}, {"role": "user", "content": text}],
        )
    except LLMError as error:
        logger.warning("Kind inference by LLM failed, the rules' kind stays: %s", error)
        return None
    kind = parse_kind_reply(reply)
    if kind is None:
        # The reply may quote the memory: log its length, not its text.
        logger.warning(
            "Kind inference by LLM: unusable reply (%d characters), the rules' kind stays.", len(reply)
        )
    return kind


def memory_request_kind_inference(*, memory: Memory) -> None:
    """After commit, queue the LLM's second opinion on a kind the rules just inferred.

    Called by memory_create / memory_update inside their transaction, after the
    participants are written (the gate reads them). Does nothing without an LLM,
    with MEMORY_KIND_LLM off, or for a memory the LLM may not read. The publish
    never raises (memories.tasks.enqueue logs instead); a lost message just leaves
    the rules' kind.
    """
    if not kind_llm_enabled():
        return
    if not kind_llm_may_read(memory_id=memory.pk, owner_id=memory.owner_id, sensitivity=memory.sensitivity):
        return
    from memories import tasks

    publish = partial(tasks.enqueue, tasks.infer_kind_with_llm, str(memory.pk), memory.updated_at.isoformat())
    transaction.on_commit(publish, robust=True)


def memory_apply_llm_kind(*, memory_id: uuid.UUID, saved_at: datetime) -> str | None:
    """Store the LLM's kind for this memory if it is still as the queuing save left it.

    Returns the kind stored, or None when nothing changed (memory deleted or saved
    again since, now sensitive or hidden from agents, LLM off or failing, or it
    agreed with the rules).
    """
    seen = (
        Memory.objects.filter(id=memory_id, updated_at=saved_at)
        .values("owner_id", "sensitivity", "title", "body", "kind", "occurred_at", "expired_at")
        .first()
    )
    if seen is None:
        return None  # deleted, or saved again: that save decided the kind
    # Consent may have been revoked since the save queued this: ask the gate again, now.
    if not kind_llm_may_read(memory_id=memory_id, owner_id=seen["owner_id"], sensitivity=seen["sensitivity"]):
        logger.info(
            "Memory %s: not sent to the LLM (sensitive or hidden from agents), the rules' kind stays.",
            memory_id,
        )
        return None
    kind = llm_classify_kind(title=seen["title"], body=seen["body"])
    if kind is None or kind == seen["kind"]:
        return None
    derived = Memory(
        kind=kind,
        title=seen["title"],
        body=seen["body"],
        occurred_at=seen["occurred_at"],
        expired_at=seen["expired_at"],
    )
    memory_apply_expiry(memory=derived)
    # The LLM call took seconds: only if the owner changed nothing meanwhile.
    # QuerySet.update leaves updated_at alone, so this is not itself "a later save".
    written = Memory.objects.filter(
        id=memory_id, updated_at=saved_at, title=seen["title"], body=seen["body"], kind=seen["kind"]
    ).update(kind=kind, expires_at=derived.expires_at, expired_at=derived.expired_at)
    if not written:
        return None
    logger.info("Memory %s: kind %s from the LLM (the rules said %s).", memory_id, kind, seen["kind"])
    return kind
