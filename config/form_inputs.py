"""Form fields shared by every web form and page filter, bounded where the value comes in.

The date a person may type goes up to year 9999, but a page filter or a memory's
date is used in arithmetic (the day after `until`, a month's grid, an expiry), which
overflows Python's datetime past 9999-12-31. One bound for all: years 1 to
config.limits.LATEST_YEAR, the same as a memory's date, with the same words.
"""

from __future__ import annotations

from datetime import date

from django import forms

from config.limits import LATEST_YEAR, TOO_FAR_IN_THE_FUTURE


class BoundedDateField(forms.DateField):
    """A DateField that refuses years past LATEST_YEAR with a form error instead of overflowing later."""

    def to_python(self, value) -> date | None:
        day = super().to_python(value)
        if day is not None and day.year > LATEST_YEAR:
            raise forms.ValidationError(TOO_FAR_IN_THE_FUTURE, code="too_far")
        return day
