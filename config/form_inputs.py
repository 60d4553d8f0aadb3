"""Form fields shared by every web form and page filter, bounded where the value comes in;
and how a form shows a service's refusal.

The date a person may type goes up to year 9999, but a page filter or a memory's
date is used in arithmetic (the day after `until`, a month's grid, an expiry), which
overflows Python's datetime past 9999-12-31. One bound for all: years 1 to
config.limits.LATEST_YEAR, the same as a memory's date, with the same words.
"""

from __future__ import annotations

from datetime import date

from django import forms
from django.core.exceptions import ValidationError

from config.limits import LATEST_YEAR, TOO_FAR_IN_THE_FUTURE


class BoundedDateField(forms.DateField):
    """A DateField that refuses years past LATEST_YEAR with a form error instead of overflowing later."""

    def to_python(self, value) -> date | None:
        day = super().to_python(value)
        if day is not None and day.year > LATEST_YEAR:
            raise forms.ValidationError(TOO_FAR_IN_THE_FUTURE, code="too_far")
        return day


def add_service_errors(form: forms.BaseForm, error: ValidationError) -> None:
    """Show a service's refusal on the form that asked for it.

    Services speak in model field names; an error for a field the form lacks, or one
    with no field at all, is shown at the top of the form.
    """
    if hasattr(error, "error_dict"):
        for field, field_messages in error.message_dict.items():
            form.add_error(field if field in form.fields else None, field_messages)
    else:
        form.add_error(None, error.messages)
