from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from config.pages import render_page
from inbox.selectors import consent_request_inbox, notification_list
from inbox.services import notifications_mark_read


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """Open consent requests, then the notifications, newest first.

    Opening the inbox marks the notifications read (shown as new this once); a consent
    request stays until the owner approves or dismisses it.
    """
    notifications = list(notification_list(recipient=request.user))
    notifications_mark_read(recipient=request.user)
    context = {
        "notifications": notifications,
        "consent_requests": consent_request_inbox(owner=request.user),
    }
    return render_page(request, "inbox/inbox.html", "inbox-list", context)
