"""`/links/<token>/`: a link invitation, opened by the person it is about."""

from __future__ import annotations

from django.urls import path

from people import views

urlpatterns = [
    path("<str:token>/", views.person_link, name="person_link"),
    path("<str:token>/accept/", views.person_link_accept, name="person_link_accept"),
]
