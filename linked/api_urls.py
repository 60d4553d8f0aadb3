"""Linked people's API, under `/api/v1/` (config/api_urls.py includes it in place)."""

from __future__ import annotations

from django.urls import path

from linked.apis import LinkAcceptApi, MyConsentsApi, PersonLinkApi, PersonLinkInviteApi

urlpatterns = [
    path(
        "people/<uuid:person_id>/link-invite/", PersonLinkInviteApi.as_view(), name="api-person-link-invite"
    ),
    path("people/<uuid:person_id>/link/", PersonLinkApi.as_view(), name="api-person-link"),
    path("links/<str:token>/accept/", LinkAcceptApi.as_view(), name="api-link-accept"),
    path("me/consents/", MyConsentsApi.as_view(), name="api-my-consents"),
]
