"""`{% load link_tags %}`: `person|is_linked` — linked to their own account, they decide their own consent."""

from __future__ import annotations

from django import template

from people.models import Person
from people.services import person_is_linked

register = template.Library()


@register.filter
def is_linked(person: Person) -> bool:
    return person_is_linked(person)
