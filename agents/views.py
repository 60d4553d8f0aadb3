from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import push_url, reswap, retarget

from agents import selectors, services
from agents.citations import citations_attach
from agents.forms import AgentForm, ChatForm, ConsentRequestForm
from agents.llm import llm_config
from agents.models import Agent, Conversation
from config.form_inputs import add_service_errors
from people.selectors import person_get
from people.services import person_is_linked

CONVERSATIONS_SHOWN = 50


def _list_context(request: HttpRequest, form: AgentForm | None = None) -> dict:
    return {
        "agents": selectors.agent_list_with_counts(owner=request.user),
        "form": form or AgentForm(),
        "llm": llm_config(),
    }


@login_required
def agent_list(request: HttpRequest) -> HttpResponse:
    return render(request, "agents/agent_list.html", _list_context(request))


@login_required
@require_POST
def agent_create(request: HttpRequest) -> HttpResponse:
    form = AgentForm(request.POST)
    if form.is_valid():
        try:
            agent = services.agent_create(owner=request.user, **form.cleaned_data)
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(
                request, f"{agent.name} is ready. It only sees memories everyone in them consented to."
            )
            return redirect("agent_chat", agent_id=agent.pk)
    return render(request, "agents/agent_list.html", _list_context(request, form))


@login_required
@require_http_methods(["GET", "POST"])
def agent_edit(request: HttpRequest, agent_id) -> HttpResponse:
    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    if agent.is_builtin:
        messages.info(request, f"{agent.name} is a built-in agent: it cannot be changed.")
        return redirect("agent_list")
    form = AgentForm(request.POST or None, initial=AgentForm.initial_for(agent))
    if request.method == "POST" and form.is_valid():
        try:
            services.agent_update(agent=agent, **form.cleaned_data)
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Saved {agent.name}.")
            return redirect("agent_list")
    return render(request, "agents/agent_form.html", {"agent": agent, "form": form})


@login_required
@require_POST
def agent_sensitive(request: HttpRequest, agent_id) -> HttpResponse:
    """Allow or stop an agent reading sensitive memories; back to where the owner was."""
    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    choice = request.POST.get("may_read_sensitive", "")
    if choice not in ("on", "off"):
        messages.error(request, "Choose whether the agent may read sensitive memories.")
    else:
        services.agent_set_sensitive_clearance(agent=agent, may_read_sensitive=choice == "on")
        if agent.may_read_sensitive:
            messages.success(request, f"{agent.name} may now read sensitive memories.")
        else:
            messages.success(request, f"{agent.name} no longer receives sensitive memories.")
    back = request.POST.get("next", "")
    if back not in (reverse("agent_list"), reverse("agent_chat", args=[agent.pk])):
        back = reverse("agent_list")
    return redirect(back)


@login_required
@require_http_methods(["GET", "POST"])
def agent_delete(request: HttpRequest, agent_id) -> HttpResponse:
    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    if agent.is_builtin:
        messages.info(request, f"{agent.name} is a built-in agent: it cannot be deleted.")
        return redirect("agent_list")
    if request.method == "POST":
        name = agent.name
        services.agent_delete(agent=agent)
        messages.success(request, f"Deleted {name} and its conversations.")
        return redirect("agent_list")
    return render(request, "agents/agent_confirm_delete.html", {"agent": agent})


# --- chat ------------------------------------------------------------------------


def _chat_context(
    request: HttpRequest, agent: Agent, conversation: Conversation | None, form: ChatForm | None = None
) -> dict:
    if form is None:
        form = ChatForm(initial={"conversation": conversation.pk if conversation else None})
    return {
        "agent": agent,
        "conversation": conversation,
        "conversations": selectors.conversation_list(owner=request.user, agent=agent)[:CONVERSATIONS_SHOWN],
        "chat_messages": citations_attach(selectors.message_list(conversation=conversation))
        if conversation
        else [],
        "pending_request_person_ids": selectors.consent_request_pending_person_ids(owner=request.user),
        "form": form,
        "llm": llm_config(),
    }


@login_required
def agent_chat(request: HttpRequest, agent_id, conversation_id=None) -> HttpResponse:
    """The chat page: a new conversation, or an earlier one when its id is in the URL."""
    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    conversation = None
    if conversation_id is not None:
        conversation = selectors.conversation_get(
            owner=request.user, agent=agent, conversation_id=conversation_id
        )
    return render(request, "agents/chat.html", _chat_context(request, agent, conversation))


@login_required
@require_POST
def agent_chat_send(request: HttpRequest, agent_id) -> HttpResponse:
    """One turn. htmx appends the question and the reply to the log; plain posts redirect."""
    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    form = ChatForm(request.POST)
    conversation = None
    if form.is_valid():
        if form.cleaned_data["conversation"] is not None:
            conversation = selectors.conversation_get(
                owner=request.user, agent=agent, conversation_id=form.cleaned_data["conversation"]
            )
        try:
            turn = services.chat_turn(
                owner=request.user, agent=agent, text=form.cleaned_data["message"], conversation=conversation
            )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            url = reverse("agent_conversation", args=[agent.pk, turn.conversation.pk])
            if not request.htmx:
                return redirect(f"{url}#message-{turn.reply.pk}")
            response = _render_turn(request, agent, turn, new_conversation=conversation is None)
            return push_url(response, url) if conversation is None else response
    context = _chat_context(request, agent, conversation, form)
    if request.htmx:
        # Errors replace the form in place; the log is left as it is.
        return retarget(
            reswap(render(request, "agents/chat.html#chat-form", context), "outerHTML"), "#chat-form"
        )
    return render(request, "agents/chat.html", context)


def _render_turn(
    request: HttpRequest, agent: Agent, turn: services.ChatTurn, *, new_conversation: bool, replaced=()
) -> HttpResponse:
    citations_attach([turn.reply])
    context = _chat_context(request, agent, turn.conversation) | {
        "turn": turn,
        "new_conversation": new_conversation,
        "replaced_ids": replaced,
    }
    return render(request, "agents/_turn.html", context)


@login_required
@require_POST
def agent_chat_retry(request: HttpRequest, agent_id, conversation_id, message_id) -> HttpResponse:
    """Ask again the question whose reply failed: htmx swaps the new turn in for the failed one."""
    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    conversation = selectors.conversation_get(
        owner=request.user, agent=agent, conversation_id=conversation_id
    )
    reply = get_object_or_404(conversation.messages, pk=message_id)
    url = reverse("agent_conversation", args=[agent.pk, conversation.pk])
    try:
        turn, failed = services.chat_retry(owner=request.user, reply=reply)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect(url)
    if not request.htmx:
        return redirect(f"{url}#message-{turn.reply.pk}")
    return _render_turn(request, agent, turn, new_conversation=False, replaced=failed)


@login_required
@require_http_methods(["GET", "POST"])
def conversation_delete(request: HttpRequest, agent_id, conversation_id) -> HttpResponse:
    """Delete one conversation, after a confirmation page. The access log stays whole."""
    agent = selectors.agent_get(owner=request.user, agent_id=agent_id)
    conversation = selectors.conversation_get(
        owner=request.user, agent=agent, conversation_id=conversation_id
    )
    if request.method == "POST":
        title = conversation.title or "Untitled"
        services.conversation_delete(owner=request.user, conversation=conversation)
        messages.success(
            request,
            f"Deleted the conversation “{title}”. Which memories {agent.name} was given stays "
            "in each memory's “Who has seen this”.",
        )
        return redirect("agent_chat", agent_id=agent.pk)
    return render(
        request, "agents/conversation_confirm_delete.html", {"agent": agent, "conversation": conversation}
    )


# --- consent requests ---------------------------------------------------------------


@login_required
@require_POST
def consent_request_create(request: HttpRequest) -> HttpResponse:
    """The "Request consent" button under a reply. It asks the owner, never changes consent."""
    form = ConsentRequestForm(request.POST)
    if not form.is_valid():
        messages.error(request, "That consent request was incomplete.")
        return redirect("agent_list")
    person = person_get(owner=request.user, person_id=form.cleaned_data["person"])
    agent = selectors.agent_get(owner=request.user, agent_id=form.cleaned_data["agent"])
    conversation = None
    if form.cleaned_data["conversation"] is not None:
        conversation = selectors.conversation_get(
            owner=request.user, agent=agent, conversation_id=form.cleaned_data["conversation"]
        )
    back = (
        reverse("agent_conversation", args=[agent.pk, conversation.pk])
        if conversation
        else reverse("agent_chat", args=[agent.pk])
    )
    try:
        services.consent_request_create(
            owner=request.user, person=person, agent=agent, conversation=conversation
        )
    except ValidationError as error:
        if request.htmx:
            return render(
                request,
                "agents/_consent_request_button.html",
                {"person": person, "error": " ".join(error.messages)},
            )
        messages.info(request, " ".join(error.messages))
        return redirect(back)
    if request.htmx:
        return render(request, "agents/_consent_request_button.html", {"person": person, "requested": True})
    if person_is_linked(person):
        messages.success(request, f"Request sent to {person.display_name}: they decide for themself.")
    else:
        messages.success(
            request,
            f"Consent request recorded for you (in your inbox and on {person.display_name}'s page). "
            f"Nothing was sent to {person.display_name}: ask them yourself.",
        )
    return redirect(back)


def _resolve_consent_request(request: HttpRequest, consent_request_id, *, approve: bool) -> HttpResponse:
    consent_request = selectors.consent_request_get(owner=request.user, consent_request_id=consent_request_id)
    person = consent_request.person
    try:
        if approve:
            services.consent_request_approve(consent_request=consent_request, actor=request.user)
        else:
            services.consent_request_dismiss(consent_request=consent_request, actor=request.user)
    except ValidationError as error:
        messages.info(request, " ".join(error.messages))
    except PermissionDenied as refused:  # a linked person answers their own requests
        messages.error(request, str(refused))
    else:
        if approve:
            messages.success(request, f"{person.display_name}'s consent is now granted.")
        else:
            messages.info(request, f"Dismissed the consent request for {person.display_name}.")
    if request.POST.get("next") == reverse("inbox"):
        return redirect("inbox")
    return redirect("person_detail", person_id=person.pk)


@login_required
@require_POST
def consent_request_approve(request: HttpRequest, consent_request_id) -> HttpResponse:
    return _resolve_consent_request(request, consent_request_id, approve=True)


@login_required
@require_POST
def consent_request_dismiss(request: HttpRequest, consent_request_id) -> HttpResponse:
    return _resolve_consent_request(request, consent_request_id, approve=False)
