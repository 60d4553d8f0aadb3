from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from inbox.models import Notification


def notification_list(*, recipient: AbstractBaseUser, limit: int = 100) -> QuerySet[Notification]:
    return Notification.objects.filter(recipient=recipient)[:limit]


def notification_unread_count(*, recipient: AbstractBaseUser) -> int:
    return Notification.objects.filter(recipient=recipient, read_at=None).count()
