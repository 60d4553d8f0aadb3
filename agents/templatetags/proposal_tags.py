"""Memory proposal cards, shown in the chat under the agent's reply and in the proposals inbox.

`{% load proposal_tags %}{% proposal_card proposal "chat" %}` renders one card;
`{% pending_proposal_count as count %}` counts the owner's waiting proposals.
"""

from __future__ import annotations

from django import template

from agents.models import MemoryProposal
from agents.proposals import memory_proposal_check, memory_proposal_pending_count

register = template.Library()

PLACES = ("chat", "inbox")


def proposal_card_context(
    *, proposal: MemoryProposal, where: str, error: str = "", csrf_token: object = None
) -> dict:
    """What agents/_proposal.html needs; the views render the same card after each action.

    A view leaves `csrf_token` out: the request's own comes from the context processor.
    """
    context = {
        "proposal": proposal,
        "check": memory_proposal_check(proposal=proposal),
        "where": where if where in PLACES else "inbox",
        "error": error,
    }
    if csrf_token is not None:
        context["csrf_token"] = csrf_token
    return context


@register.inclusion_tag("agents/_proposal.html", takes_context=True)
def proposal_card(context: template.Context, proposal: MemoryProposal, where: str = "inbox") -> dict:
    return proposal_card_context(proposal=proposal, where=where, csrf_token=context.get("csrf_token"))


@register.simple_tag(takes_context=True)
def pending_proposal_count(context: template.Context) -> int:
    return memory_proposal_pending_count(owner=context["request"].user)
