"""The built-in offline responder: answers from the retrieved memories, no model.

With no LLM configured the chat still works: it lists the memories relevant to
the question that the agent may use (what the consent gate let through and the
relevance cut-off kept, exactly what a model would have been given), when they
happened and who was there, and says plainly that it is not a language model.
When nothing relevant is left it says it found nothing rather than listing
unrelated memories.
"""

from __future__ import annotations

from django.utils import timezone

from memories.models import Memory

EXCERPT_LENGTH = 160

OFFLINE_PREFIX = (
    "I am Keepsake's offline responder, not a language model: "
    "I can only show you the memories this agent may use."
)


def memory_people(memory: Memory) -> list[str]:
    """Who is in `memory`, by name ("you" for the owner's own entry)."""
    return ["you" if p.person.is_self else p.person.display_name for p in memory.participants.all()]


def memory_date(memory: Memory) -> str:
    occurred = timezone.localtime(memory.occurred_at)
    return f"{occurred.day} {occurred:%B %Y}"


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= EXCERPT_LENGTH:
        return text
    return text[:EXCERPT_LENGTH].rsplit(" ", 1)[0] + "…"


def _describe(position: int, memory: Memory) -> str:
    line = f"{position}. {memory_date(memory)}"
    if memory.title:
        line += f" — {memory.title}"
    line += f": {_excerpt(memory.body)}"
    people = memory_people(memory)
    details = []
    if people:
        details.append("with " + ", ".join(people))
    if memory.source_person is not None:
        details.append(
            "told by " + ("you" if memory.source_person.is_self else memory.source_person.display_name)
        )
    if details:
        line += f" ({'; '.join(details)})"
    return line


def offline_reply(*, question: str, memories: list[Memory]) -> str:
    if not memories:
        return (
            f"{OFFLINE_PREFIX}\n\nI found no memories this agent may use that match your question. "
            "Memories with anyone who has not consented are never searched."
        )
    count = len(memories)
    lines = [
        OFFLINE_PREFIX,
        "",
        f"I found {count} memor{'y that matches' if count == 1 else 'ies that match'} your question, "
        "best match first:",
        *(_describe(position, memory) for position, memory in enumerate(memories, start=1)),
    ]
    return "\n".join(lines)
