"""Keeps each signed-in browser's record for the Sessions page (accounts/sessions.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from accounts.sessions import signed_in_session_touch
from config.unavailable import UNAVAILABLE_ERRORS, unavailable_response

logger = logging.getLogger(__name__)


class SignedInSessionMiddleware:
    """After authentication: a session signed out elsewhere is logged out here; `last_seen_at`
    is refreshed at most once a minute. Bearer-token requests have no session and pass by."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        try:
            if session is not None and session.session_key and request.user.is_authenticated:
                signed_in_session_touch(request=request)
        except UNAVAILABLE_ERRORS as exception:
            # The session is read here, before any view: a database that cannot be reached
            # answers the same clear 503 a view's would (config/unavailable.py), never a 500.
            logger.warning("%s %s answered 503: %r", request.method, request.path, exception)
            return unavailable_response(request, exception)
        return self.get_response(request)
