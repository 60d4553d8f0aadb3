"""The built-in offline responder: answers from the retrieved memories, no model.

With no LLM configured the chat still works: it lists the memories relevant to
the question that the agent may use (what the consent gate let through and the
relevance cut-off kept, exactly what a model would have been given), when they
happened and who was there, and says plainly that it is not a language model.
When nothing relevant is left it says it found nothing rather than listing
unrelated memories.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.utils import timezone

from memories.models import Memory
from people.models import Person
from people.selectors import person_name_for_others

EXCERPT_LENGTH = 160

OFFLINE_PREFIX = (
    "I am Keepsake's offline responder, not a language model: "
    "I can only show you the memories this agent may use."
)


def person_name(person: Person, *, owner_name: str | None) -> str:
    """A person by name: "you" for Self in the owner's own chat (no owner_name), else as others read them."""
    if owner_name is None:
        return "you" if person.is_self else person.display_name
    return person_name_for_others(person=person, owner_name=owner_name)


def memory_people(memory: Memory, *, owner_name: str | None = None) -> list[str]:
    """Who is in `memory`, by name ("you" for the owner's own entry unless `owner_name` names them)."""
    return [person_name(p.person, owner_name=owner_name) for p in memory.participants.all()]


def memory_owner_names(memories: list[Memory]) -> dict[int, str]:
    """Each memory owner's username, in one query: a circle's memories come from several journals."""
    owners = get_user_model().objects.filter(pk__in={memory.owner_id for memory in memories})
    return {owner.pk: owner.get_username() for owner in owners}


def memory_date(memory: Memory) -> str:
    occurred = timezone.localtime(memory.occurred_at)
    return f"{occurred.day} {occurred:%B %Y}"


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= EXCERPT_LENGTH:
        return text
    return text[:EXCERPT_LENGTH].rsplit(" ", 1)[0] + "…"


def _describe(position: int, memory: Memory, *, owner_name: str | None) -> str:
    line = f"{position}. {memory_date(memory)}"
    if memory.title:
        line += f" — {memory.title}"
    line += f": {_excerpt(memory.body)}"
    people = memory_people(memory, owner_name=owner_name)
    details = [f"{owner_name}'s memory"] if owner_name is not None else []
    if people:
        details.append("with " + ", ".join(people))
    if memory.source_person is not None:
        details.append("told by " + person_name(memory.source_person, owner_name=owner_name))
    if details:
        line += f" ({'; '.join(details)})"
    return line


def offline_reply(*, question: str, memories: list[Memory], attribute_owners: bool = False) -> str:
    """The reply; with `attribute_owners` (a circle's agent) each memory is named as its owner's.

    A circle's reply may be read by every member, so no memory is "you": each says whose it is.
    """
    if not memories:
        return (
            f"{OFFLINE_PREFIX}\n\nI found no memories this agent may use that match your question. "
            "Memories with anyone who has not consented are never searched."
        )
    count = len(memories)
    owner_names = memory_owner_names(memories) if attribute_owners else None
    lines = [
        OFFLINE_PREFIX,
        "",
        f"I found {count} memor{'y that matches' if count == 1 else 'ies that match'} your question, "
        "best match first:",
        *(
            _describe(
                position, memory, owner_name=None if owner_names is None else owner_names[memory.owner_id]
            )
            for position, memory in enumerate(memories, start=1)
        ),
    ]
    return "\n".join(lines)
