from __future__ import annotations

from django.urls import path

from people import views

urlpatterns = [
    path("", views.person_list, name="person_list"),
    path("new/", views.person_create, name="person_create"),
    path("mentions/", views.person_mention_options, name="person_mention_options"),
    path("<uuid:person_id>/", views.person_detail, name="person_detail"),
    path("<uuid:person_id>/edit/", views.person_edit, name="person_edit"),
    path("<uuid:person_id>/photo/", views.person_photo, name="person_photo"),
    path("<uuid:person_id>/delete/", views.person_delete, name="person_delete"),
    path("<uuid:person_id>/consent/", views.person_consent, name="person_consent"),
]
