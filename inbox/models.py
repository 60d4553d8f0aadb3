"""In-app notifications: a small inbox per user, with an unread count in the header.

A notification carries only what its recipient may see: it is written by the
service that knows the recipient, in words about the recipient's own objects
(their circle, their link, a request addressed to them), never a memory's text.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class NotificationKind(models.TextChoices):
    LINK_ACCEPTED = "link_accepted", "Link accepted"
    CONSENT_CHANGED = "consent_changed", "Consent changed by the person"
    CONSENT_REQUEST = "consent_request", "Consent request"
    JOIN_REQUEST = "join_request", "Join request"
    UNLINKED = "unlinked", "Unlinked"
    CONSENT_OVERRIDDEN = "consent_overridden", "Consent changed by the journal's owner"
    JOIN_APPROVED = "join_approved", "Join request approved"
    JOIN_DECLINED = "join_declined", "Join request declined"
    CIRCLE_REMOVED = "circle_removed", "Removed from a circle"
    CIRCLE_DELETED = "circle_deleted", "Circle deleted"
    CIRCLE_INVITE = "circle_invite", "Circle invitation"
    LINK_INVITE = "link_invite", "Link invitation"
    NEW_SIGN_IN = "new_sign_in", "New sign-in"
    SECOND_STEP_FAILED = "second_step_failed", "Wrong sign-in codes"


class Notification(models.Model):
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    kind = models.CharField(max_length=20, choices=NotificationKind.choices)
    text = models.CharField(max_length=500)
    url = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["recipient", "read_at"], name="inbox_unread_idx")]

    def __str__(self) -> str:
        return f"to {self.recipient_id}: {self.text}"
