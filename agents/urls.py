from __future__ import annotations

from django.urls import path

from agents import views

urlpatterns = [
    path("", views.agent_list, name="agent_list"),
    path("new/", views.agent_create, name="agent_create"),
    path("<uuid:agent_id>/edit/", views.agent_edit, name="agent_edit"),
    path("<uuid:agent_id>/delete/", views.agent_delete, name="agent_delete"),
    path("<uuid:agent_id>/chat/", views.agent_chat, name="agent_chat"),
    path("<uuid:agent_id>/chat/send/", views.agent_chat_send, name="agent_chat_send"),
    path("<uuid:agent_id>/chat/<uuid:conversation_id>/", views.agent_chat, name="agent_conversation"),
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
