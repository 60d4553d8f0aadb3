from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("people/", include("people.urls")),
    path("search/", include("memories.search_urls")),
    path("api/", include("config.api_urls")),
    path("settings/", include("portability.urls")),
    path("agents/", include("agents.urls")),
    path("", include("memories.urls")),
]
