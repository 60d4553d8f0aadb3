from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

# No 'unsafe-inline' and no 'unsafe-eval' anywhere: every script and stylesheet is a
# static file, htmx is told not to inject its indicator <style> (base.html's htmx-config
# meta) and the API docs use drf-spectacular's split view, whose init script is a URL.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"


class SecurityHeadersMiddleware:
    """Content-Security-Policy and Permissions-Policy on every response.

    Django's SecurityMiddleware and XFrameOptionsMiddleware already send nosniff,
    Referrer-Policy, Cross-Origin-Opener-Policy (same-origin by default),
    X-Frame-Options and, over HTTPS, HSTS; Django 5.2 has no CSP.
    The headers go on every response, not only HTML: a policy on JSON or a file
    download costs nothing and covers a browser that sniffs one as a page.
    A view that sets its own header keeps it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response
