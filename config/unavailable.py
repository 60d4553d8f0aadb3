"""A database or broker that cannot be reached answers a clear 503, never a 500.

PostgreSQL restarting, a connection cut mid-request, a deadlock that outlived the
service's retries: each raises an OperationalError or InterfaceError, which would
otherwise reach the user as "Something went wrong". The request's transaction has
rolled back by then (every write is one atomic service call), so the page can say
honestly that nothing was half-saved and that trying again is the fix. API and
/mcp/ callers get JSON with the same message, htmx requests the message alone
(static/js/forms.js shows it), and all a Retry-After.

The middleware catches what a view raises; `server_error` (settings' handler500)
catches the rest, e.g. the session failing to save after the view ran.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerOperationalError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

UNAVAILABLE_ERRORS = (
    OperationalError,
    InterfaceError,
    BrokerOperationalError,
    RedisConnectionError,
    RedisTimeoutError,
)
RETRY_AFTER_SECONDS = 5
DATABASE_ERRORS = (OperationalError, InterfaceError)
MESSAGE = (
    "Keepsake could not reach its {what} for a moment. Nothing was half-saved: if you were "
    "saving something, it was either saved whole or not at all. Check, and try again in a few seconds."
)


def unavailable_response(request: HttpRequest, exception: BaseException) -> HttpResponse:
    what = "database" if isinstance(exception, DATABASE_ERRORS) else "task queue"
    message = MESSAGE.format(what=what)
    if request.path.startswith("/mcp"):
        error = {"code": -32603, "message": message}
        response: HttpResponse = JsonResponse({"jsonrpc": "2.0", "id": None, "error": error}, status=503)
    elif request.path.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=503)
    elif request.headers.get("HX-Request") == "true":
        # htmx swaps nothing for an error: static/js/forms.js shows this text with the page's messages.
        response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
    else:
        # Standalone (no base.html): the inbox badge and the user menu need the database.
        response = HttpResponse(loader.render_to_string("503.html", {"message": message}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


class ServiceUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, UNAVAILABLE_ERRORS):
            return None
        logger.warning("%s %s answered 503: %r", request.method, request.path, exception)
        return unavailable_response(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: a 503 when what failed outside a view was the database or the broker."""
    # Django calls this inside its `except` block, so the exception is still at hand.
    exception = sys.exc_info()[1]
    if isinstance(exception, UNAVAILABLE_ERRORS):
        logger.warning("%s %s answered 503: %r", request.method, request.path, exception)
        return unavailable_response(request, exception)
    return defaults.server_error(request)
