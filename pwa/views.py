"""The installable app: its manifest, its service worker (at the site's root, so that its scope
is the whole site), the offline page it keeps, and where captures typed offline are sent."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.http import require_GET, require_POST

from config.limits import MEMORY_BODY_MAX_LENGTH
from pwa.services import UnknownMentions, offline_capture_save

# Everything the offline page needs, and nothing that is anyone's: no page, no API answer.
SHELL_ASSETS = [
    "css/keepsake.css",
    "css/pages.css",
    "css/journal.css",
    "css/shell.css",
    "js/offline.js",
    "img/favicon.svg",
    "img/icon-192.png",
]


@require_GET
@cache_control(max_age=3600)
def manifest(request: HttpRequest) -> JsonResponse:
    data = {
        "name": "Keepsake",
        "short_name": "Keepsake",
        "description": "Your memories, shared only with the people in them who agree.",
        "id": "/",
        "start_url": "/",
        "scope": "/",
        "display": "standalone",
        "background_color": "#f7f4ee",
        "theme_color": "#2f5d62",
        "icons": [
            {"src": static("img/favicon.svg"), "sizes": "any", "type": "image/svg+xml"},
            {"src": static("img/icon-192.png"), "sizes": "192x192", "type": "image/png"},
            {"src": static("img/icon-512.png"), "sizes": "512x512", "type": "image/png"},
            {
                "src": static("img/icon-maskable-512.png"),
                "sizes": "512x512",
                "type": "image/png",
                "purpose": "maskable",
            },
        ],
    }
    return JsonResponse(data, content_type="application/manifest+json")


@require_GET
@never_cache
def service_worker(request: HttpRequest) -> HttpResponse:
    """/sw.js: a worker registered from here controls every page of the site.

    Never cached by the browser's HTTP cache (a new version is picked up on the next
    visit); it names the static files by their current URLs (hashed in production).
    """
    context = {
        "version": "|".join(static(path) for path in SHELL_ASSETS),
        "shell": [reverse("pwa_offline"), *(static(path) for path in SHELL_ASSETS)],
        "offline_url": reverse("pwa_offline"),
        "static_prefix": static(""),
    }
    response = render(request, "pwa/sw.js", context, content_type="text/javascript")
    response["Service-Worker-Allowed"] = "/"
    return response


@require_GET
def offline_page(request: HttpRequest) -> HttpResponse:
    """The page the worker shows when the network is gone: the same for everyone (it is cached)."""
    return render(request, "pwa/offline.html", {})


@login_required
@require_POST
def offline_capture(request: HttpRequest) -> JsonResponse:
    """A capture the browser kept while offline: `Idempotency-Key` makes a retry harmless."""
    body = request.POST.get("body", "").strip()
    if not body:
        return JsonResponse({"detail": "Write something first."}, status=400)
    if len(body) > MEMORY_BODY_MAX_LENGTH:
        return JsonResponse({"detail": f"At most {MEMORY_BODY_MAX_LENGTH} characters."}, status=400)
    typed_at = None
    if request.POST.get("typed_at"):
        try:
            typed_at = parse_datetime(request.POST["typed_at"])
        except ValueError:
            typed_at = None
        if typed_at is not None and typed_at.tzinfo is None:
            typed_at = None
    try:
        saved = offline_capture_save(
            owner=request.user,
            key=request.headers.get("Idempotency-Key", ""),
            body=body,
            typed_at=typed_at,
        )
    except UnknownMentions as unknown:
        names = ", ".join(f"@{name}" for name in unknown.names)
        return JsonResponse(
            {
                "detail": f"{names} is no one in your journal yet: finish it in the form.",
                "unknown": unknown.names,
            },
            status=409,
        )
    except ValidationError as error:
        return JsonResponse({"detail": " ".join(error.messages)}, status=400)
    return JsonResponse(
        {
            "memory": str(saved.memory.pk),
            "url": reverse("memory_detail", args=[saved.memory.pk]),
            "created": saved.created,
        },
        status=201 if saved.created else 200,
    )
