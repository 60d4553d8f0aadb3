"""Dates as the journal shows them: a memory with no time given shows no time."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format

from memories.dates import occurred_has_time

register = template.Library()


@register.filter
def memory_when(value: datetime | None, style: str = "short") -> str:
    """ "1 May 2024 · 14:30", or "1 May 2024" for a whole day; "long" adds the weekday."""
    if value is None:
        return ""
    local = timezone.localtime(value)
    day = date_format(local, "l j F Y" if style == "long" else "j M Y")
    if not occurred_has_time(value):
        return day
    return f"{day} · {date_format(local, 'H:i')}"


@register.filter
def years_ago(value: datetime, today) -> str:
    """ "1 year ago", "3 years ago" (by calendar year, as On this day counts them)."""
    years = today.year - timezone.localtime(value).year
    return f"{years} year{'' if years == 1 else 's'} ago"
