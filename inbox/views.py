from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from inbox.selectors import notification_list
from inbox.services import notifications_mark_read


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """The notifications, newest first. Opening the inbox marks them read (shown as new this once)."""
    notifications = list(notification_list(recipient=request.user))
    notifications_mark_read(recipient=request.user)
    template = "inbox/inbox.html" + ("#inbox-list" if request.htmx else "")
    return render(request, template, {"notifications": notifications})
