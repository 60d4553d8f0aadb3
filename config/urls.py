from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path

from agents.mcpserver.views import mcp_endpoint

# API and /mcp/ callers get JSON for a refused request (e.g. a body that is too large).
handler400 = "config.api_urls.bad_request"
# A database or broker failure outside a view answers 503 (config/unavailable.py).
handler500 = "config.unavailable.server_error"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    # E-mail: the address and digest (settings/email/), verification links, password reset.
    path("", include("mail.urls")),
    path("people/", include("people.urls")),
    path("search/", include("memories.search_urls")),
    path("api/", include("config.api_urls")),
    path("settings/", include("portability.urls")),
    # MCP Streamable HTTP; without the slash too, since a redirect would lose the POST.
    re_path(r"^mcp/?$", mcp_endpoint, name="mcp"),
    path("agents/", include("agents.urls")),
    path("circles/", include("circles.urls")),
    path("", include("linked.urls")),
    path("inbox/", include("inbox.urls")),
    path("universe/", include("memories.universe_urls")),
    path("memories/insights/", include("insights.urls")),
    path("photos/", include("attachments.urls")),
    path("", include("pwa.urls")),
    path("", include("memories.urls")),
]
