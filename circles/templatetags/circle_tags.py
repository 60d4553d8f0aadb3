"""Circle panels that other apps' pages include with one line (people and memories never import circles).

- `{% circle_consents person %}` on a person's page: a consent switch per circle.
- `{% consent_history consent_events as history %}`: each event with its audience's label.
- `{% share_panel memory %}` and `{% privacy_audit memory %}` on a memory's page.
- `{{ person|circle_person_name:memory }}` on a circle's memory cards and pages.
"""

from __future__ import annotations

from django import template
from django.utils import timezone

from circles.models import CircleInvite
from circles.selectors import (
    consent_audience_labels,
    memory_share_panel,
    person_audience_consents,
)
from memories.gate_explain import memory_privacy_audit
from memories.models import Memory
from people.forms import ConsentForm
from people.models import ConsentEvent, Person
from people.selectors import person_name_for_others

register = template.Library()


def _consent_form_for(context: template.Context, circle_id, status: str) -> ConsentForm:
    # A refused change comes back bound, with its errors, for the circle it was meant for.
    bound = context.get("circle_consent_form")
    if bound is not None and context.get("circle_consent_for") == circle_id:
        return bound
    return ConsentForm(initial={"status": status}, auto_id=f"id_circle-{circle_id}-%s")


@register.inclusion_tag("circles/_person_circle_consents.html", takes_context=True)
def circle_consents(context: template.Context, person: Person) -> dict:
    """One consent switch per circle the person's owner belongs to (My agents has its own)."""
    rows = []
    for row in person_audience_consents(person=person):
        if row.circle is None:
            continue
        form = _consent_form_for(context, row.circle.pk, row.status)
        if person.is_self and not form.is_bound:
            form = None  # granted by sharing: nothing to switch (a refused try still shows why)
        rows.append({"consent": row, "form": form, "saved": context.get("circle_saved") == row.circle.pk})
    return {"person": person, "rows": rows, "csrf_token": context.get("csrf_token")}


@register.simple_tag(takes_context=True)
def consent_history(context: template.Context, events) -> list[tuple[ConsentEvent, str]]:
    """`{% consent_history consent_events as history %}`: (event, "My agents" or the circle's name)."""
    events = list(events)
    labels = consent_audience_labels(
        owner=context["request"].user, audiences=[event.audience for event in events]
    )
    return [(event, labels[event.audience]) for event in events]


@register.inclusion_tag("circles/_share_panel.html", takes_context=True)
def share_panel(context: template.Context, memory: Memory) -> dict:
    """The owner's circles: shared here or not, and who in the memory has not consented to each."""
    return {
        "memory": memory,
        "rows": memory_share_panel(memory=memory, owner=context["request"].user),
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("circles/_privacy_audit.html")
def privacy_audit(memory: Memory) -> dict:
    """Who can see this memory and why — asked of the gate itself."""
    return {"memory": memory, "audit": memory_privacy_audit(memory=memory)}


@register.filter
def invite_state(invite: CircleInvite) -> str:
    """ "active", "expired" or "withdrawn", for the owner's list of invite links."""
    if invite.revoked_at is not None:
        return "withdrawn"
    if invite.expires_at <= timezone.now():
        return "expired"
    return "active"


@register.filter
def circle_person_name(person: Person, memory: Memory) -> str:
    """`{{ participant.person|circle_person_name:memory }}`: a person in a circle's memory, as members see it.

    The owner's Self is shown as the owner's username (people.selectors.person_name_for_others).
    """
    return person_name_for_others(person=person, owner_name=memory.owner.get_username())
