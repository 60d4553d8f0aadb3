"""Linked people's pages: the owner's side on the person page, the link page, My consents."""

from __future__ import annotations

from django.urls import path

from config.routes import object_paths
from linked import views

urlpatterns = [
    # The owner's side, on their person's page.
    path(
        "people/<uuid:person_id>/link-invites/new/",
        views.person_link_invite_create,
        name="person_link_invite_create",
    ),
    path(
        "people/<uuid:person_id>/link-invites/send/",
        views.person_link_invite_send,
        name="person_link_invite_send",
    ),
    path(
        "people/<uuid:person_id>/link-invites/<uuid:invite_id>/withdraw/",
        views.person_link_invite_revoke,
        name="person_link_invite_revoke",
    ),
    path("people/<uuid:person_id>/unlink/", views.person_unlink, name="person_unlink"),
    # The link invitation, opened by the person it is about.
    path("links/<str:token>/", views.person_link, name="person_link"),
    path("links/<str:token>/accept/", views.person_link_accept, name="person_link_accept"),
    # My consents: what a person linked to entries in other people's journals decides.
    path("me/consents/", views.my_consents, name="my_consents"),
    path("me/consents/people/<uuid:person_id>/", views.my_consent_set, name="my_consent_set"),
    path("me/consents/people/<uuid:person_id>/unlink/", views.my_unlink, name="my_unlink"),
    path(
        "me/consents/journals/<int:owner_id>/revoke-all/",
        views.my_consents_revoke_all,
        name="my_consents_revoke_all",
    ),
    *object_paths(
        views,
        "my_consent_request",
        ["grant", "dismiss"],
        prefix="me/consents/requests/",
        id_name="consent_request_id",
    ),
]
