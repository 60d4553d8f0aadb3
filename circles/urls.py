from __future__ import annotations

from django.urls import path

from circles import chat_views, views

urlpatterns = [
    path("", views.circle_list, name="circle_list"),
    path("new/", views.circle_create, name="circle_create"),
    path("invites/<str:token>/", views.circle_invite, name="circle_invite"),
    path("invites/<str:token>/ask/", views.circle_invite_ask, name="circle_invite_ask"),
    path("<uuid:circle_id>/", views.circle_detail, name="circle_detail"),
    path("<uuid:circle_id>/search/", views.circle_search, name="circle_search"),
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
    path("<uuid:circle_id>/edit/", views.circle_edit, name="circle_edit"),
    path("<uuid:circle_id>/delete/", views.circle_delete, name="circle_delete"),
    path("<uuid:circle_id>/leave/", views.circle_leave, name="circle_leave"),
    path(
        "<uuid:circle_id>/members/<int:user_id>/remove/",
        views.circle_member_remove,
        name="circle_member_remove",
    ),
    path("<uuid:circle_id>/memories/new/", views.circle_memory_create, name="circle_memory_create"),
    path(
        "<uuid:circle_id>/memories/<uuid:memory_id>/", views.circle_memory_detail, name="circle_memory_detail"
    ),
    path("<uuid:circle_id>/invites/new/", views.circle_invite_create, name="circle_invite_create"),
    path("<uuid:circle_id>/invites/send/", views.circle_invite_send, name="circle_invite_send"),
    path(
        "<uuid:circle_id>/invites/<uuid:invite_id>/revoke/",
        views.circle_invite_revoke,
        name="circle_invite_revoke",
    ),
    path(
        "<uuid:circle_id>/requests/<uuid:request_id>/approve/",
        views.circle_request_approve,
        name="circle_request_approve",
    ),
    path(
        "<uuid:circle_id>/requests/<uuid:request_id>/decline/",
        views.circle_request_decline,
        name="circle_request_decline",
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
