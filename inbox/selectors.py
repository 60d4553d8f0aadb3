from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, Q, QuerySet

from agents.models import ConsentRequest, ConsentRequestStatus
from inbox.models import Notification
from people.models import ConsentStatus
from people.services import person_is_linked


def notification_list(*, recipient: AbstractBaseUser, limit: int = 100) -> QuerySet[Notification]:
    return Notification.objects.filter(recipient=recipient)[:limit]


def notification_unread_count(*, recipient: AbstractBaseUser) -> int:
    return Notification.objects.filter(recipient=recipient, read_at=None).count()


def _consent_requests_pending(*, owner: AbstractBaseUser) -> QuerySet[ConsentRequest]:
    # A request about someone who has consented since is moot: the person page hides it too.
    return ConsentRequest.objects.filter(owner=owner, status=ConsentRequestStatus.PENDING).exclude(
        person__consent_status=ConsentStatus.GRANTED
    )


def consent_request_inbox(*, owner: AbstractBaseUser, limit: int = 100) -> list[ConsentRequest]:
    """The owner's open consent requests, newest first, each marked `linked` (then it went to the person)."""
    requests = list(_consent_requests_pending(owner=owner).select_related("person", "agent")[:limit])
    for consent_request in requests:
        consent_request.linked = person_is_linked(consent_request.person)
    return requests


def consent_request_waiting_count(*, owner: AbstractBaseUser) -> int:
    """Requests only the owner can act on: about people who do not decide for themselves.

    A linked person was asked directly (a notification of their own), so the owner only waits.
    """
    return (
        _consent_requests_pending(owner=owner)
        .filter(
            Q(person__linked_user__isnull=True)
            | Q(person__linked_user_id=F("person__owner_id"))
            | Q(person__is_self=True)
        )
        .count()
    )
