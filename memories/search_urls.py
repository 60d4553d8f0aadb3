from __future__ import annotations

from django.urls import path

from memories import search_views

urlpatterns = [
    path("", search_views.search, name="memory_search"),
]
