"""Agent panels that other apps' pages include with one line.

`{% load agent_tags %}{% consent_requests person %}` on a person's page and
`{% load agent_tags %}{% access_log memory %}` on a memory's page.
"""

from __future__ import annotations

from django import template

from agents.selectors import access_log_list, consent_request_list_pending
from memories.models import Memory
from people.models import ConsentStatus, Person
from people.services import person_is_linked

register = template.Library()


@register.inclusion_tag("agents/_consent_requests.html", takes_context=True)
def consent_requests(context: template.Context, person: Person) -> dict:
    """Pending requests for `person`; none are shown once they have consented."""
    pending = []
    if person.consent_status != ConsentStatus.GRANTED:
        pending = list(consent_request_list_pending(owner=context["request"].user, person=person))
    return {
        "person": person,
        "consent_requests": pending,
        "linked": person_is_linked(person),  # then the request went to them: the owner only waits
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("agents/_access_log.html", takes_context=True)
def access_log(context: template.Context, memory: Memory) -> dict:
    """Who has seen this memory: which agent, when, on which surface."""
    return {"memory": memory, "access_logs": access_log_list(owner=context["request"].user, memory=memory)}
