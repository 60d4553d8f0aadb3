"""The circle's agent chat pages: the shared conversation and each member's private one.

Thin: membership is checked on every request (circle_get_for_member 404s for
anyone else, and a private conversation is only ever looked up for its member);
the memories come from circles.agent, which asks the gate, and the stored replies
are read through circles.replies, which asks it again for the reader.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from agents.llm import llm_config
from circles import agent as circle_agent_module
from circles.replies import circle_messages_for_reader
from circles.selectors import circle_get_for_member, circle_members
from circles.services import circle_update
from config.pages import render_page


def _chat_context(request: HttpRequest, circle, *, private: bool, error: str = "", draft: str = "") -> dict:
    conversation = circle_agent_module.circle_conversation(circle=circle, user=request.user, private=private)
    # Every stored reply is shown only if its sources are visible to this reader now.
    readable = circle_messages_for_reader(conversation=conversation, reader=request.user)
    return {
        "circle": circle,
        "private": private,
        "conversation": conversation,
        "chat_messages": readable.messages,
        "citable": readable.citable,
        "agent": circle_agent_module.circle_agent(circle),
        "roles": circle_agent_module.CIRCLE_AGENT_ROLES,
        "member_count": circle_members(circle=circle).count(),
        "llm": llm_config(),
        "error": error,
        "draft": draft,
    }


def _chat_url(circle, private: bool) -> str:
    return reverse("circle_chat_private" if private else "circle_chat", args=[circle.pk])


@login_required
@require_GET
def circle_chat(request: HttpRequest, circle_id, private: bool = False) -> HttpResponse:
    circle = circle_get_for_member(user=request.user, circle_id=circle_id)
    return render(request, "circles/chat.html", _chat_context(request, circle, private=private))


@login_required
@require_POST
def circle_chat_send(request: HttpRequest, circle_id, private: bool = False) -> HttpResponse:
    circle = circle_get_for_member(user=request.user, circle_id=circle_id)
    conversation = circle_agent_module.circle_conversation(circle=circle, user=request.user, private=private)
    text = request.POST.get("message", "")
    try:
        reply = circle_agent_module.circle_chat_turn(conversation=conversation, user=request.user, text=text)
    except ValidationError as error:
        context = _chat_context(request, circle, private=private, error=" ".join(error.messages), draft=text)
        return render_page(request, "circles/chat.html", "chat-panel", context, status=400)
    except PermissionDenied:
        raise Http404("No such conversation.") from None
    if request.htmx:
        # A reply that failed keeps the question in the box, ready to send again.
        draft = text if reply.is_error else ""
        return render(
            request,
            "circles/chat.html#chat-panel",
            _chat_context(request, circle, private=private, draft=draft),
        )
    return redirect(_chat_url(circle, private))


@login_required
@require_POST
def circle_agent_settings(request: HttpRequest, circle_id) -> HttpResponse:
    circle = circle_get_for_member(user=request.user, circle_id=circle_id)
    try:
        circle_agent_module.circle_agent_update(
            circle=circle,
            by=request.user,
            role=request.POST.get("role", ""),
            instructions=request.POST.get("instructions", ""),
            may_read_sensitive=request.POST.get("agent_may_read_sensitive") == "on",
        )
        circle_update(
            circle=circle, by=request.user, agents_may_read=request.POST.get("agents_may_read") == "on"
        )
    except PermissionDenied:
        raise Http404("No such circle.") from None
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
    else:
        messages.success(request, "The circle's agent is set up.")
    return redirect(_chat_url(circle, False))
