from __future__ import annotations

from django.urls import path

from config.routes import object_paths
from people import views

urlpatterns = [
    *object_paths(views, "person", ["list", "create", "detail", "edit", "photo", "delete", "consent"]),
    path("mentions/", views.person_mention_options, name="person_mention_options"),
]
