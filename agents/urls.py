from __future__ import annotations

from django.urls import path

from agents import proposal_views, views
from config.routes import object_paths

urlpatterns = [
    *object_paths(views, "agent", ["list", "create", "edit", "delete", "sensitive", "chat"]),
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
    *object_paths(
        proposal_views,
        "memory_proposal",
        ["list", "detail", "confirm", "edit", "dismiss"],
        prefix="proposals/",
        id_name="proposal_id",
    ),
    *object_paths(views, "consent_request", ["create", "approve", "dismiss"], prefix="consent-requests/"),
]
