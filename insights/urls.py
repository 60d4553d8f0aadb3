from __future__ import annotations

from django.urls import path

from insights import views

urlpatterns = [
    path("new/", views.insight_new, name="insight_new"),
]
