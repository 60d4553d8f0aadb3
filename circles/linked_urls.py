"""`/me/...`: what a person linked to entries in other people's journals decides."""

from __future__ import annotations

from django.urls import path

from circles import linked_views as views

urlpatterns = [
    path("consents/", views.my_consents, name="my_consents"),
    path("consents/people/<uuid:person_id>/", views.my_consent_set, name="my_consent_set"),
    path("consents/people/<uuid:person_id>/unlink/", views.my_unlink, name="my_unlink"),
    path(
        "consents/journals/<int:owner_id>/revoke-all/",
        views.my_consents_revoke_all,
        name="my_consents_revoke_all",
    ),
    path(
        "consents/requests/<uuid:consent_request_id>/grant/",
        views.my_consent_request_grant,
        name="my_consent_request_grant",
    ),
    path(
        "consents/requests/<uuid:consent_request_id>/dismiss/",
        views.my_consent_request_dismiss,
        name="my_consent_request_dismiss",
    ),
]
