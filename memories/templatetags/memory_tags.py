from __future__ import annotations

from django import template

from memories.gate_explain import AgentVisibility, memory_agent_visibility, memory_consent_blockers
from memories.models import Memory
from people.models import Person

register = template.Library()


@register.simple_tag
def consent_blockers(memory: Memory) -> list[Person]:
    """`{% consent_blockers memory as blockers %}`: who keeps this memory from agents."""
    return memory_consent_blockers(memory)


@register.filter
def blocker_names(blockers: list[Person]) -> str:
    """ "Bob (pending), Carol (revoked)" for the hidden-from-agents badge."""
    return ", ".join(f"{person.display_name} ({person.consent_status})" for person in blockers)


@register.simple_tag
def agent_visibility(memory: Memory) -> AgentVisibility:
    """`{% agent_visibility memory as visibility %}`: everything that keeps this memory from agents."""
    return memory_agent_visibility(memory)


@register.filter
def hidden_reasons(visibility: AgentVisibility) -> str:
    """One line for a card's hidden-from-agents badge: who has not consented first, then the rest."""
    reasons = []
    if visibility.blockers:
        reasons.append(blocker_names(visibility.blockers))
    if visibility.source_blocker is not None:
        source = visibility.source_blocker
        reasons.append(f"told by {source.display_name} ({source.consent_status})")
    if visibility.self_withheld:
        reasons.append("your own consent (Self) is not granted")
    if visibility.expired:
        reasons.append("expired, agents no longer see this")
    if visibility.superseded:
        reasons.append("replaced by a newer memory")
    return " · ".join(reasons)


# A memory's kind decides how long agents use it; people read it in these words. The
# long-lived kinds (knowledge, preference, identity, relationship) say nothing a person
# needs on a card, so they show no word at all.
_PLAIN_KINDS = {
    "context": ("For now", "Agents use it for a week; it stays in your journal."),
    "event": ("Event", "Agents use it for a month; it stays in your journal."),
    "task": ("To do", "Agents use it for two weeks; it stays in your journal."),
    "observation": ("Passing note", "Agents use it for three days; it stays in your journal."),
}


@register.filter
def kind_plain(kind: str) -> str:
    """A card's word for the memory's kind ("To do"), or "" for the long-lived kinds."""
    return _PLAIN_KINDS.get(kind, ("", ""))[0]


@register.filter
def kind_plain_help(kind: str) -> str:
    return _PLAIN_KINDS.get(kind, ("", "Long-lived: agents keep using it."))[1]
