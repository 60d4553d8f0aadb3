"""Birthdays: a day and a month, and the year when the owner knows it.

Stored as three small columns on Person (the year may be missing, as in Monica
or vCard), exchanged as ISO 8601 text: "1990-05-01", or "--05-01" without a year.
Someone born on 29 February celebrates on 28 February in other years.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date

BIRTHDAY_FORMAT_HELP = "A birthday is YYYY-MM-DD, or --MM-DD when the year is not known."
_ISO = re.compile(r"^(?:(?P<year>\d{4})|-)-(?P<month>\d{2})-(?P<day>\d{2})$")
# Any leap year: 29 February exists in it.
_LEAP_YEAR = 2000


def birthday_problem(*, month: int, day: int, year: int | None) -> str | None:
    """Why these numbers are not a birthday, or None when they are one."""
    if not 1 <= month <= 12:
        return "The month must be between 1 and 12."
    if year is not None and not 1 <= year <= 9999:
        return "The year must be between 1 and 9999."
    last_day = calendar.monthrange(_LEAP_YEAR if year is None else year, month)[1]
    if not 1 <= day <= last_day:
        month_name = calendar.month_name[month]
        if year is not None and month == 2 and day == 29:
            return f"{year} had no 29 February."
        return f"{month_name} has no day {day}."
    if year is not None and date(year, month, day) > date.today():
        return "A birthday cannot be in the future."
    return None


@dataclass(frozen=True)
class Birthday:
    month: int
    day: int
    year: int | None = None

    def __post_init__(self) -> None:
        problem = birthday_problem(month=self.month, day=self.day, year=self.year)
        if problem:
            raise ValueError(problem)

    @classmethod
    def parse(cls, text: str) -> Birthday:
        """From "YYYY-MM-DD" or "--MM-DD"; ValueError saying what is wrong."""
        match = _ISO.match(text.strip())
        if not match:
            raise ValueError(BIRTHDAY_FORMAT_HELP)
        year = int(match["year"]) if match["year"] else None
        return cls(month=int(match["month"]), day=int(match["day"]), year=year)

    def isoformat(self) -> str:
        if self.year is None:
            return f"--{self.month:02d}-{self.day:02d}"
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"

    def in_year(self, year: int) -> date:
        """The day it is celebrated in `year` (28 February for 29 February outside leap years)."""
        if self.month == 2 and self.day == 29 and not calendar.isleap(year):
            return date(year, 2, 28)
        return date(year, self.month, self.day)

    def next_on_or_after(self, today: date) -> date:
        this_year = self.in_year(today.year)
        return this_year if this_year >= today else self.in_year(today.year + 1)

    def age_on(self, day: date) -> int | None:
        """Years completed on `day` (None when the year of birth is not known)."""
        if self.year is None:
            return None
        return day.year - self.year - (day < self.in_year(day.year))

    def label(self) -> str:
        """ "1 May 1990", or "1 May" without a year."""
        text = f"{self.day} {calendar.month_name[self.month]}"
        return text if self.year is None else f"{text} {self.year}"
