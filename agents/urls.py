from __future__ import annotations

from django.urls import path

from agents import proposal_views, views

urlpatterns = [
    path("", views.agent_list, name="agent_list"),
    path("new/", views.agent_create, name="agent_create"),
    path("<uuid:agent_id>/edit/", views.agent_edit, name="agent_edit"),
    path("<uuid:agent_id>/delete/", views.agent_delete, name="agent_delete"),
    path("<uuid:agent_id>/sensitive/", views.agent_sensitive, name="agent_sensitive"),
    path("<uuid:agent_id>/chat/", views.agent_chat, name="agent_chat"),
    path("<uuid:agent_id>/chat/send/", views.agent_chat_send, name="agent_chat_send"),
    path("<uuid:agent_id>/chat/<uuid:conversation_id>/", views.agent_chat, name="agent_conversation"),
    path(
        "<uuid:agent_id>/chat/<uuid:conversation_id>/delete/",
        views.conversation_delete,
        name="conversation_delete",
    ),
    path(
        "<uuid:agent_id>/chat/<uuid:conversation_id>/retry/<uuid:message_id>/",
        views.agent_chat_retry,
        name="agent_chat_retry",
    ),
    path(
        "<uuid:agent_id>/chat/<uuid:conversation_id>/suggest-memories/",
        proposal_views.conversation_suggest_memories,
        name="conversation_suggest_memories",
    ),
    path("proposals/", proposal_views.memory_proposal_list, name="memory_proposal_list"),
    path(
        "proposals/<uuid:proposal_id>/", proposal_views.memory_proposal_detail, name="memory_proposal_detail"
    ),
    path(
        "proposals/<uuid:proposal_id>/confirm/",
        proposal_views.memory_proposal_confirm,
        name="memory_proposal_confirm",
    ),
    path(
        "proposals/<uuid:proposal_id>/edit/", proposal_views.memory_proposal_edit, name="memory_proposal_edit"
    ),
    path(
        "proposals/<uuid:proposal_id>/dismiss/",
        proposal_views.memory_proposal_dismiss,
        name="memory_proposal_dismiss",
    ),
    path("consent-requests/new/", views.consent_request_create, name="consent_request_create"),
    path(
        "consent-requests/<uuid:consent_request_id>/approve/",
        views.consent_request_approve,
        name="consent_request_approve",
    ),
    path(
        "consent-requests/<uuid:consent_request_id>/dismiss/",
        views.consent_request_dismiss,
        name="consent_request_dismiss",
    ),
]
