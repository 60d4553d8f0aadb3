"""`{% load insight_tags %}{% insight_sources memory %}` on a memory's page: what an insight came from.

Owner only (the page is the owner's; the tag checks again): no agent or circle surface shows it.
"""

from __future__ import annotations

from django import template

from insights.selectors import insight_sources as insight_sources_of
from memories.models import Memory

register = template.Library()


@register.inclusion_tag("insights/_insight_sources.html", takes_context=True)
def insight_sources(context: template.Context, memory: Memory) -> dict:
    return {"memory": memory, "sources": insight_sources_of(owner=context["request"].user, memory=memory)}
