from __future__ import annotations

from django.urls import path

from inbox import views

urlpatterns = [
    path("", views.inbox, name="inbox"),
]
