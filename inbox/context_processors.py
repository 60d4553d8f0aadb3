"""`inbox_unread_count` and `consent_requests_waiting` for the header badges on every page.

Lazy: each count is asked of the database only when a template shows it (a full page's
header), once per render — not for htmx fragments, JSON or anonymous visitors.
"""

from __future__ import annotations

from functools import cache

from django.http import HttpRequest

from inbox.selectors import consent_request_waiting_count, notification_unread_count


def inbox(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "inbox_unread_count": cache(lambda: notification_unread_count(recipient=user)),
        "consent_requests_waiting": cache(lambda: consent_request_waiting_count(owner=user)),
    }
