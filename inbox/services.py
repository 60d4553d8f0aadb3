from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from inbox.models import Notification


def notify(*, recipient: AbstractBaseUser | int, kind: str, text: str, url: str = "") -> Notification:
    recipient_id = recipient if isinstance(recipient, int) else recipient.pk
    return Notification.objects.create(recipient_id=recipient_id, kind=kind, text=text[:500], url=url[:300])


def notify_many(*, recipients: Iterable[int], kind: str, text: str, url: str = "") -> list[Notification]:
    """The same notification to each of `recipients` (user ids), once each, in one insert."""
    return Notification.objects.bulk_create(
        Notification(recipient_id=recipient_id, kind=kind, text=text[:500], url=url[:300])
        for recipient_id in sorted(set(recipients))
    )


def notifications_mark_read(*, recipient: AbstractBaseUser) -> int:
    return Notification.objects.filter(recipient=recipient, read_at=None).update(read_at=timezone.now())
