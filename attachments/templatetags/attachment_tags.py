"""Photos on pages: thumbnails on cards, the memory page's gallery, the edit page's list, the calendar.

Each tag is given a memory the page already shows to this reader; every image it draws
is still fetched through attachments.views, which asks the gate again for that reader.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django import template
from django.utils import timezone

from attachments.models import Attachment
from attachments.selectors import attachments_of_memory

register = template.Library()

STRIP_SIZE = 4


def _photos(memory) -> list[Attachment]:
    cached = getattr(memory, "_prefetched_objects_cache", {}).get("attachments")
    if cached is not None:
        return sorted(cached, key=lambda item: (item.position, item.created_at))
    return list(attachments_of_memory(memory_id=memory.pk))


@register.inclusion_tag("attachments/_strip.html", takes_context=True)
def photo_strip(context, memory) -> dict:
    photos = _photos(memory)
    return {"photos": photos[:STRIP_SIZE], "more": max(0, len(photos) - STRIP_SIZE), "memory": memory}


@register.inclusion_tag("attachments/_gallery.html", takes_context=True)
def photo_gallery(context, memory) -> dict:
    user = context.get("user")
    return {
        "photos": _photos(memory),
        "memory": memory,
        "is_owner": user is not None and memory.owner_id == user.pk,
    }


@register.simple_tag
def memory_photos(memory) -> list[Attachment]:
    return _photos(memory)


@register.simple_tag(takes_context=True)
def month_photos(context, month: date) -> dict[date, Attachment]:
    """The owner's first photo of each day of the month (for the calendar's cells)."""
    user = context.get("user")
    if user is None or not user.is_authenticated or month is None:
        return {}
    zone = timezone.get_current_timezone()
    start = timezone.make_aware(datetime.combine(month.replace(day=1) - timedelta(days=7), time.min), zone)
    end = start + timedelta(days=46)
    photos = (
        Attachment.objects.filter(owner=user, memory__occurred_at__gte=start, memory__occurred_at__lt=end)
        .select_related("memory")
        .order_by("memory__occurred_at", "position")
    )
    days: dict[date, Attachment] = {}
    for photo in photos:
        days.setdefault(timezone.localtime(photo.memory.occurred_at, zone).date(), photo)
    return days


@register.filter
def day_photo(days: dict, day: date) -> Attachment | None:
    return days.get(day) if days else None
