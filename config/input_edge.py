"""Every request's input cleaned at the edge, before any view reads it (issue #40 item 2).

One place for what no form, page or API field should have to remember:

- **Control characters** in query strings and web form fields (GET everywhere; POST,
  plain and multipart, outside /api/ and /mcp/, whose bodies DRF and the MCP SDK parse;
  file contents are the uploads' own business) are removed: NUL (which
  PostgreSQL cannot store: a message with one was a 500) and the other C0 and C1
  controls, keeping tab, line feed and carriage return. A browser never types them;
  pasted from elsewhere they are invisible garbage, and dropping them keeps the rest of
  what the person wrote. Parameter names are cleaned too. The REST API's JSON fields
  refuse them instead, with a 400 that says which (config.api_inputs.StrictCharField):
  an API caller is told, never guessed for.
- **A last net** for input that still gets past a view's checks: PostgreSQL refusing a
  value (a DataError: too long, out of range, an impossible date) or Python's date
  arithmetic overflowing (year 9999 plus a day) is the caller's input, not a fault of
  the server, so it answers 400 (JSON under /api/ and /mcp/) instead of a 500. It is
  logged as an error with its traceback: each one is a missing check to add where the
  value comes in (dates, for instance, go through config.form_inputs.BoundedDateField),
  and the fuzz tests fail on any request that needed the net.

Lengths are each field's own (forms' max_length, the serializers', config.limits);
Django bounds the whole body (DATA_UPLOAD_MAX_MEMORY_SIZE) and the number of fields.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from django.db import DataError, connection, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict

logger = logging.getLogger(__name__)

# C0 controls but tab, LF and CR; DEL; C1 controls.
CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
NET_ERRORS = (DataError, OverflowError)
JSON_PREFIXES = ("/api/", "/mcp/")
BAD_INPUT_MESSAGE = (
    "Some of what was sent is out of range or cannot be stored. Check the values and try again."
)


def without_control_characters(value: str) -> str:
    return CONTROL_CHARACTERS.sub("", value)


def _cleaned(query: QueryDict) -> QueryDict | None:
    """A cleaned copy when any name or value holds a control character; None when none does."""
    if not any(
        CONTROL_CHARACTERS.search(key) or any(CONTROL_CHARACTERS.search(value) for value in values)
        for key, values in query.lists()
    ):
        return None
    cleaned = QueryDict(mutable=True, encoding=query.encoding)
    for key, values in query.lists():
        cleaned.setlistdefault(without_control_characters(key), []).extend(
            without_control_characters(value) for value in values
        )
    cleaned._mutable = False
    return cleaned


class InputEdgeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        query = _cleaned(request.GET)
        if query is not None:
            request.GET = query
        if (
            request.method == "POST"
            and request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data")
            and not request.path.startswith(JSON_PREFIXES)
        ):
            # Reading POST here parses the body as CsrfViewMiddleware would a moment later.
            # Not under /api/ and /mcp/: DRF parses its own bodies (and answers in JSON),
            # and its text fields refuse control characters by name.
            form = _cleaned(request.POST)
            if form is not None:
                request.POST = form
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, NET_ERRORS):
            return None
        logger.error(
            "Unchecked input reached %s %s: %s", request.method, request.path, exception, exc_info=exception
        )
        if isinstance(exception, DataError) and connection.in_atomic_block:
            transaction.set_rollback(True)  # the failed statement left the transaction unusable
        if request.path.startswith(JSON_PREFIXES):
            return JsonResponse({"detail": BAD_INPUT_MESSAGE}, status=400)
        return HttpResponse(BAD_INPUT_MESSAGE, status=400, content_type="text/plain; charset=utf-8")
