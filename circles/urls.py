from __future__ import annotations

from django.urls import path

from circles import chat_views, views
from config.routes import object_paths

urlpatterns = [
    *object_paths(views, "circle", ["list", "create", "detail", "search", "edit", "delete", "leave"]),
    path("invites/<str:token>/", views.circle_invite, name="circle_invite"),
    path("invites/<str:token>/ask/", views.circle_invite_ask, name="circle_invite_ask"),
    path("<uuid:circle_id>/chat/", chat_views.circle_chat, name="circle_chat"),
    path("<uuid:circle_id>/chat/send/", chat_views.circle_chat_send, name="circle_chat_send"),
    path(
        "<uuid:circle_id>/chat/private/",
        chat_views.circle_chat,
        {"private": True},
        name="circle_chat_private",
    ),
    path(
        "<uuid:circle_id>/chat/private/send/",
        chat_views.circle_chat_send,
        {"private": True},
        name="circle_chat_private_send",
    ),
    path("<uuid:circle_id>/chat/agent/", chat_views.circle_agent_settings, name="circle_agent_settings"),
    path(
        "<uuid:circle_id>/members/<int:user_id>/remove/",
        views.circle_member_remove,
        name="circle_member_remove",
    ),
    *object_paths(
        views, "circle_memory", ["create", "detail"], prefix="<uuid:circle_id>/memories/", id_name="memory_id"
    ),
    *object_paths(
        views, "circle_invite", ["create", "revoke"], prefix="<uuid:circle_id>/invites/", id_name="invite_id"
    ),
    path("<uuid:circle_id>/invites/send/", views.circle_invite_send, name="circle_invite_send"),
    *object_paths(
        views,
        "circle_request",
        ["approve", "decline"],
        prefix="<uuid:circle_id>/requests/",
        id_name="request_id",
    ),
    # From a memory's page (its owner) and a person's page (their owner).
    path("<uuid:circle_id>/share/<uuid:memory_id>/", views.memory_share, name="memory_share"),
    path("<uuid:circle_id>/unshare/<uuid:memory_id>/", views.memory_unshare, name="memory_unshare"),
    path(
        "<uuid:circle_id>/consent/<uuid:person_id>/",
        views.person_circle_consent,
        name="person_circle_consent",
    ),
]
