from __future__ import annotations

import calendar

from django import forms

from config.limits import PERSON_NOTES_MAX_LENGTH
from people.birthdays import Birthday, birthday_problem
from people.models import ConsentStatus, Person, PersonKind
from people.photos import PHOTO_MAX_BYTES
from people.services import RELATIONSHIP_MAX_LENGTH

# Offered in a <datalist>: any other words are fine too.
RELATIONSHIP_SUGGESTIONS = [
    "Partner",
    "Spouse",
    "Mother",
    "Father",
    "Parent",
    "Daughter",
    "Son",
    "Child",
    "Sister",
    "Brother",
    "Grandmother",
    "Grandfather",
    "Grandchild",
    "Aunt",
    "Uncle",
    "Cousin",
    "Friend",
    "Best friend",
    "Colleague",
    "Manager",
    "Neighbour",
    "Teacher",
    "Doctor",
    "Pet",
]

MONTH_CHOICES = [("", "Month"), *((str(number), calendar.month_name[number]) for number in range(1, 13))]


def _birthday_number(label: str, *, max_value: int) -> forms.IntegerField:
    """A birthday's day or year: optional, a number from 1, typed on a phone's number pad."""
    return forms.IntegerField(
        label=label,
        required=False,
        min_value=1,
        max_value=max_value,
        widget=forms.NumberInput(attrs={"inputmode": "numeric", "placeholder": label}),
    )


class PersonForm(forms.Form):
    display_name = forms.CharField(
        label="Name", max_length=200, error_messages={"required": "A name is required."}
    )
    relationship = forms.CharField(
        label="Relationship to me",
        required=False,
        max_length=RELATIONSHIP_MAX_LENGTH,
        widget=forms.TextInput(attrs={"list": "relationship-suggestions", "autocomplete": "off"}),
        help_text="In your words: sister, old friend from school, the neighbour’s cat…",
    )
    aliases = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Other names, separated by commas (e.g. Grandma, Nana).",
    )
    kind = forms.ChoiceField(choices=PersonKind.choices, initial=PersonKind.HUMAN)
    birthday_day = _birthday_number("Day", max_value=31)
    birthday_month = forms.TypedChoiceField(
        label="Month", choices=MONTH_CHOICES, coerce=int, empty_value=None, required=False
    )
    birthday_year = _birthday_number("Year", max_value=9999)
    notes = forms.CharField(
        required=False, max_length=PERSON_NOTES_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 3})
    )

    birthday_fields = ("birthday_day", "birthday_month", "birthday_year")

    def clean_display_name(self) -> str:
        name = " ".join(self.cleaned_data["display_name"].split())
        if not name:
            raise forms.ValidationError("A name is required.")
        return name

    def clean_aliases(self) -> list[str]:
        aliases = [alias.strip() for alias in self.cleaned_data["aliases"].split(",")]
        too_long = [alias for alias in aliases if len(alias) > 200]
        if too_long:
            raise forms.ValidationError("Each alias must be at most 200 characters.")
        return [alias for alias in aliases if alias]

    def clean(self) -> dict:
        cleaned = super().clean()
        day, month, year = (cleaned.get(name) for name in self.birthday_fields)
        if any(name in self.errors for name in self.birthday_fields):
            return cleaned
        if day is None and month is None:
            if year is not None:
                self.add_error("birthday_day", "Add the day and month too, or leave the year empty.")
            cleaned["birthday"] = None
            return cleaned
        if day is None or month is None:
            self.add_error("birthday_day", "A birthday needs both a day and a month.")
            return cleaned
        problem = birthday_problem(month=month, day=day, year=year)
        if problem:
            self.add_error("birthday_day", problem)
            return cleaned
        cleaned["birthday"] = Birthday(month=month, day=day, year=year)
        return cleaned

    def details(self) -> dict:
        """The cleaned fields as people.services takes them."""
        data = self.cleaned_data
        return {
            "display_name": data["display_name"],
            "aliases": data["aliases"],
            "kind": data["kind"],
            "notes": data["notes"],
            "relationship": data["relationship"],
            "birthday": data["birthday"],
        }

    @classmethod
    def initial_for(cls, person: Person) -> dict:
        return {
            "display_name": person.display_name,
            "relationship": person.relationship,
            "aliases": ", ".join(person.aliases),
            "kind": person.kind,
            "birthday_day": person.birthday_day,
            "birthday_month": person.birthday_month,
            "birthday_year": person.birthday_year,
            "notes": person.notes,
        }


class PersonPhotoForm(forms.Form):
    photo = forms.FileField(
        label="Photo",
        required=False,
        widget=forms.FileInput(attrs={"accept": "image/jpeg,image/png,image/webp,image/gif"}),
        help_text=(
            f"JPEG, PNG, WebP or GIF, up to {PHOTO_MAX_BYTES // (1024 * 1024)} MB. Keepsake keeps a small "
            "square copy without the file’s hidden details (such as where it was taken). Only you see it; "
            "agents never get photos."
        ),
    )
    remove_photo = forms.BooleanField(label="Remove the photo", required=False)


class ConsentForm(forms.Form):
    status = forms.ChoiceField(
        choices=ConsentStatus.choices,
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "Choose granted, pending or revoked."},
    )
    reason = forms.CharField(
        required=False,
        max_length=500,
        # Read by the owner on a person's page and by a linked person on their own consents page:
        # words that fit whoever decides.
        widget=forms.TextInput(attrs={"placeholder": "Optional: why, kept in the history"}),
    )
