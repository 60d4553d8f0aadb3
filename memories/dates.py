"""When a memory happened: a moment, or a whole day.

A memory written with a date and no time is stored at 00:00:00.000000 of that
day in the journal's time zone (settings.TIME_ZONE), and shown without a time.
A convention rather than a column: the export, the import, the API and every
selector keep working on one `occurred_at`, and a memory saved "now" always
carries seconds, so it is never mistaken for a day. The one cost: a moment typed
as exactly 00:00 reads as the whole day.
"""

from __future__ import annotations

from datetime import date, datetime, time

from django.utils import timezone


def occurred_has_time(value: datetime) -> bool:
    """False when `value` stands for a whole day (local midnight, to the microsecond)."""
    return timezone.localtime(value).time() != time.min


def occurred_day(day: date) -> datetime:
    """The stored moment of a memory dated `day` with no time."""
    return timezone.make_aware(datetime.combine(day, time.min))


def occurred_moment(day: date, at: time) -> datetime:
    return timezone.make_aware(datetime.combine(day, at))
