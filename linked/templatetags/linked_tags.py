"""`{% load linked_tags %}{% link_panel person %}`: the owner's side of linking on a person's page.

The panel shows whether the person is linked (then: Unlink…), or the open invitation and
a button for a new one; a view of this app may add its words (`link_message`,
`link_error`, and the new link, shown once: `new_link_invite`, `new_link_url`).
"""

from __future__ import annotations

from django import template

from linked.selectors import person_link_invites_open
from people.models import Person
from people.services import person_is_linked

register = template.Library()

PANEL_WORDS = ("link_message", "link_error", "new_link_invite", "new_link_url")


def link_panel_context(*, person: Person, **words: object) -> dict:
    return {
        "person": person,
        "is_linked": person_is_linked(person),
        "link_invites": person_link_invites_open(person=person),
        **words,
    }


@register.inclusion_tag("linked/_link_panel.html", takes_context=True)
def link_panel(context: template.Context, person: Person) -> dict:
    words = {name: context.get(name) for name in PANEL_WORDS}
    return {**link_panel_context(person=person, **words), "csrf_token": context.get("csrf_token")}
