"""The owner's side of memory proposals: the inbox, and save / edit / dismiss on each card.

Every action works as a plain form post (redirecting back to the chat or the inbox)
and with htmx (answering the card, swapped in place).
"""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from agents import proposals, selectors
from agents.forms import MemoryProposalForm, ProposalConfirmForm
from agents.models import MemoryProposal, MemoryProposalStatus
from agents.templatetags.proposal_tags import proposal_card_context
from config.form_inputs import add_service_errors
from config.pages import render_page

DECIDED_SHOWN = 20


def _where(request: HttpRequest) -> str:
    return "chat" if (request.POST.get("next") or request.GET.get("next")) == "chat" else "inbox"


def _back(proposal: MemoryProposal, where: str) -> str:
    if where == "chat" and proposal.conversation_id and proposal.agent_id:
        url = reverse("agent_conversation", args=[proposal.agent_id, proposal.conversation_id])
    else:
        url = reverse("memory_proposal_list")
    return f"{url}#proposal-{proposal.pk}"


def _card(request: HttpRequest, proposal: MemoryProposal, where: str, error: str = "") -> HttpResponse:
    # The request's own csrf_token (from the context processor) fills the card's forms.
    context = proposal_card_context(proposal=proposal, where=where, error=error)
    return render(request, "agents/_proposal.html", context)


@login_required
def memory_proposal_list(request: HttpRequest) -> HttpResponse:
    owner = request.user
    return render(
        request,
        "agents/proposal_list.html",
        {
            "pending": proposals.memory_proposal_list(owner=owner, status=MemoryProposalStatus.PENDING),
            "decided": proposals.memory_proposal_list(owner=owner).exclude(
                status=MemoryProposalStatus.PENDING
            )[:DECIDED_SHOWN],
        },
    )


@login_required
def memory_proposal_detail(request: HttpRequest, proposal_id) -> HttpResponse:
    """One card (htmx: "Cancel" on the edit form); without htmx, the card where it lives."""
    proposal = proposals.memory_proposal_get(owner=request.user, proposal_id=proposal_id)
    where = _where(request)
    if request.htmx:
        return _card(request, proposal, where)
    return redirect(_back(proposal, where))


def _decide(request: HttpRequest, proposal: MemoryProposal, where: str, decide) -> HttpResponse:
    try:
        done = decide()
    except ValidationError as error:
        if request.htmx:
            return _card(request, proposal, where, error=" ".join(error.messages))
        messages.error(request, " ".join(error.messages))
        return redirect(_back(proposal, where))
    if request.htmx:
        return _card(request, proposal, where)
    messages.success(request, done)
    return redirect(_back(proposal, where))


@login_required
@require_POST
def memory_proposal_confirm(request: HttpRequest, proposal_id) -> HttpResponse:
    proposal = proposals.memory_proposal_get(owner=request.user, proposal_id=proposal_id)
    form = ProposalConfirmForm(request.POST)

    def confirm() -> str:
        memory = proposals.memory_proposal_confirm(
            proposal=proposal, actor=request.user, confirmed_warnings=form.confirmed_warnings
        )
        return f"Saved “{memory.headline}” to your journal."

    return _decide(request, proposal, _where(request), confirm)


@login_required
@require_POST
def memory_proposal_dismiss(request: HttpRequest, proposal_id) -> HttpResponse:
    proposal = proposals.memory_proposal_get(owner=request.user, proposal_id=proposal_id)

    def dismiss() -> str:
        proposals.memory_proposal_dismiss(proposal=proposal, actor=request.user)
        return "Dismissed the proposal. Nothing was saved."

    return _decide(request, proposal, _where(request), dismiss)


@login_required
@require_http_methods(["GET", "POST"])
def memory_proposal_edit(request: HttpRequest, proposal_id) -> HttpResponse:
    """Edit a waiting proposal: htmx swaps the card for this form and back; without JS it is a page."""
    proposal = proposals.memory_proposal_get(owner=request.user, proposal_id=proposal_id)
    where = _where(request)
    if proposal.status != MemoryProposalStatus.PENDING:
        if request.htmx:
            return _card(request, proposal, where)
        messages.info(request, f"This proposal was already {proposal.get_status_display().lower()}.")
        return redirect(_back(proposal, where))
    form = MemoryProposalForm(
        request.POST or None,
        owner=request.user,
        proposal=proposal,
        initial=MemoryProposalForm.initial_for(proposal),
    )
    if request.method == "POST" and form.is_valid():
        try:
            # Saving the edit and the memory is one decision: both or neither.
            with transaction.atomic():
                proposals.memory_proposal_update(
                    proposal=proposal,
                    actor=request.user,
                    text=form.cleaned_data["text"],
                    kind=form.cleaned_data.get("kind"),
                    sensitivity=form.cleaned_data.get("sensitivity"),
                    people=form.chosen_people() if not proposal.is_insight else (),
                    new_people=form.chosen_new_names() if not proposal.is_insight else (),
                )
                if "and_confirm" in request.POST:
                    proposals.memory_proposal_confirm(proposal=proposal, actor=request.user)
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            proposal = proposals.memory_proposal_get(owner=request.user, proposal_id=proposal.pk)
            if request.htmx:
                return _card(request, proposal, where)
            if proposal.status == MemoryProposalStatus.CONFIRMED:
                messages.success(request, f"Saved “{proposal.memory.headline}” to your journal.")
            else:
                messages.success(request, "Saved your changes. The proposal is still waiting for you.")
            return redirect(_back(proposal, where))
    context = {"proposal": proposal, "form": form, "where": where, "back": _back(proposal, where)}
    return render_page(request, "agents/proposal_edit.html", "proposal-form", context)


@login_required
@require_POST
def conversation_suggest_memories(request: HttpRequest, agent_id, conversation_id) -> HttpResponse:
    """Ask the worker to look through this conversation for memories to propose (proposals only)."""
    from agents import tasks
    from memories.tasks import enqueue

    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    conversation = selectors.conversation_get(
        owner=request.user, agent=agent, conversation_id=conversation_id
    )
    transaction.on_commit(
        partial(enqueue, tasks.propose_memories_from_conversation, str(conversation.pk)), robust=True
    )
    messages.info(
        request,
        "Looking through this conversation for things worth remembering. Suggestions wait in Memory "
        "proposals; nothing is saved until you confirm it.",
    )
    return redirect("agent_conversation", agent_id=agent.pk, conversation_id=conversation.pk)
