from __future__ import annotations

from django import template

from memories.indexing import memory_unindexed_count

register = template.Library()


@register.simple_tag(takes_context=True)
def unindexed_memory_count(context: template.Context) -> int:
    """`{% unindexed_memory_count as waiting %}`: the signed-in owner's memories not yet embedded."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return 0
    return memory_unindexed_count(owner=user)
