"""The latest future date a memory's text speaks of, so a short lifetime starts there.

"Our wedding is planned for next year", written today, is an event; an event
leaves the agents' view 30 days after its date (settings.MEMORY_KIND_LIFETIMES),
and the only date the memory has is today's. Counting those 30 days from the
end of next year instead keeps it in view until the wedding has been and gone.
memories.lifecycle.memory_apply_expiry uses this for every short-lived kind.

Readable rules, like the kind rules, matched against the memory's own date
(`after`), not the clock: an entry from 2019 that says "next year" speaks of
2020. Each phrase counts up to the end of the period it names, because a plan
for "next month" may fall on its last day:

* relative: "tomorrow", "next week / month / year", "next summer", "this
  winter", "next Friday", "in 3 weeks", "in a couple of months";
* a year: "in 2027", "by 2027", "until 2027";
* a date or month with a year: "14 June 2027", "June 14, 2027", "June 2027",
  "2027-06-14";
* a date or month without a year ("on 14 June", "in June") only when the text
  also says it lies ahead ("planned", "booked", "will", "going to", "coming
  up", …): "we went to Rome in May" is a past May.

Dates before the memory's own date, and dates more than MAX_YEARS_AHEAD years
after it, are ignored.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, time, timedelta

from django.utils import timezone

MAX_YEARS_AHEAD = 30

_MONTH_NAMES = "january february march april may june july august september october november december".split()
_MONTHS = {name: index for index, name in enumerate(_MONTH_NAMES, start=1)} | {
    name[:3]: index for index, name in enumerate(_MONTH_NAMES, start=1)
}
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAYS = {
    name: index
    for index, name in enumerate("monday tuesday wednesday thursday friday saturday sunday".split())
}
_SEASON_END_MONTH = {"spring": 5, "summer": 8, "autumn": 11, "fall": 11, "winter": 2}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "a couple of": 2,
    "a few": 3,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + r")"

# Said of something ahead: what lets a date without a year count as future.
_AHEAD = re.compile(
    r"\b(?:will|'ll|shall|going to|gonna|plan(?:s|ned|ning)?|booked|scheduled|set for|is on|are on"
    r"|coming up|upcoming|due|until|till|starts?|begins?|expect(?:s|ed|ing)?|looking forward"
    r"|can't wait|hoping to|hope to|next|arranged|organi[sz]ing|save the date)\b",
    re.IGNORECASE,
)


def _rule(pattern: str) -> re.Pattern[str]:
    return re.compile(r"\b" + pattern + r"\b", re.IGNORECASE)


_TOMORROW = _rule(r"tomorrow")
_NEXT_PERIOD = _rule(r"next (?P<period>week|month|year)")
_SEASON = _rule(r"(?P<which>next|this|coming) (?P<season>spring|summer|autumn|fall|winter)")
_NEXT_WEEKDAY = _rule(r"(?:next|this coming) (?P<weekday>" + "|".join(_WEEKDAYS) + r")")
_IN_COUNT = _rule(r"in " + _COUNT + r" (?P<unit>days?|weeks?|months?|years?)")
_YEAR = _rule(r"(?:in|by|until|till|for|during) (?:(?:early|mid|late|the end of) )?(?P<year>\d{4})")
_ISO_DATE = re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b")
_DAY_MONTH = _rule(r"(?P<day>\d{1,2})(?:st|nd|rd|th)?(?: of)? " + _MONTH + r"(?:,? (?P<year>\d{4}))?")
_MONTH_DAY = _rule(_MONTH + r" (?P<day>\d{1,2})(?:st|nd|rd|th)?(?:,? (?P<year>\d{4}))?")
# Not "this May": "this may take a while".
_MONTH_ONLY = _rule(
    r"(?:in|by|until|till|for|next|early|mid|late|end of) " + _MONTH + r"(?: (?P<year>\d{4}))?"
)


def _end_of_month(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def _add_months(day: date, months: int) -> date:
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _month_number(name: str) -> int:
    return _MONTHS[name.rstrip(".").lower()]


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def _candidates(text: str, today: date) -> list[date]:
    """Every future day the text names (end of the period), unfiltered."""
    found: list[date] = []
    ahead = bool(_AHEAD.search(text))
    if _TOMORROW.search(text):
        found.append(today + timedelta(days=1))
    for match in _NEXT_PERIOD.finditer(text):
        period = match.group("period").lower()
        if period == "week":
            found.append(today + timedelta(days=13 - today.weekday()))  # Sunday of next week
        elif period == "month":
            following = _add_months(today.replace(day=1), 1)
            found.append(_end_of_month(following.year, following.month))
        else:
            found.append(date(today.year + 1, 12, 31))
    for match in _SEASON.finditer(text):
        end_month = _SEASON_END_MONTH[match.group("season").lower()]
        year = today.year + (1 if end_month < today.month else 0)
        end = _end_of_month(year, end_month)
        in_it_now = 0 <= (end.year * 12 + end.month) - (today.year * 12 + today.month) <= 2
        if match.group("which").lower() == "next" and in_it_now:
            end = _end_of_month(year + 1, end_month)
        found.append(end)
    for match in _NEXT_WEEKDAY.finditer(text):
        days = (_WEEKDAYS[match.group("weekday").lower()] - today.weekday()) % 7 or 7
        found.append(today + timedelta(days=days + 7))  # "next Friday" may mean the one after
    for match in _IN_COUNT.finditer(text):
        count, unit = _count(match.group("count")), match.group("unit").lower().rstrip("s")
        if unit == "day":
            found.append(today + timedelta(days=count))
        elif unit == "week":
            found.append(today + timedelta(weeks=count))
        elif unit == "month":
            found.append(_add_months(today, count))
        elif count <= MAX_YEARS_AHEAD:
            found.append(date(today.year + count, today.month, min(today.day, 28)))
    for match in _YEAR.finditer(text):
        found.append(date(int(match.group("year")), 12, 31))
    for match in _ISO_DATE.finditer(text):
        found.extend(_safe_date(int(match.group("year")), int(match.group("month")), int(match.group("day"))))
    for pattern in (_DAY_MONTH, _MONTH_DAY):
        for match in pattern.finditer(text):
            month, day = _month_number(match.group("month")), int(match.group("day"))
            if match.group("year"):
                found.extend(_safe_date(int(match.group("year")), month, day))
            elif ahead:
                found.extend(_next_occurrence(today, month, day))
    for match in _MONTH_ONLY.finditer(text):
        month = _month_number(match.group("month"))
        if match.group("year"):
            found.append(_end_of_month(int(match.group("year")), month))
        elif ahead:
            year = today.year + (1 if month < today.month else 0)
            found.append(_end_of_month(year, month))
    return found


def _safe_date(year: int, month: int, day: int) -> list[date]:
    try:
        return [date(year, month, day)]
    except ValueError:  # 31 June, month 13: not a date
        return []


def _next_occurrence(today: date, month: int, day: int) -> list[date]:
    for year in (today.year, today.year + 1):
        candidate = _safe_date(year, month, day)
        if candidate and candidate[0] >= today:
            return candidate
    return []


def latest_future_date(*, text: str, after: datetime) -> datetime | None:
    """The end of the latest future day `text` names, after `after` (aware); None if it names none."""
    local = timezone.localtime(after) if timezone.is_aware(after) else after
    today = local.date()
    horizon = date(min(today.year + MAX_YEARS_AHEAD, 9000), 12, 31)
    future = [day for day in _candidates(text, today) if today < day <= horizon]
    if not future:
        return None
    latest = max(future)
    end_of_day = datetime.combine(latest, time(23, 59, 59), tzinfo=local.tzinfo)
    return max(end_of_day, after)
