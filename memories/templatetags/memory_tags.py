from __future__ import annotations

from django import template

from memories.models import Memory
from memories.selectors import memory_consent_blockers
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
