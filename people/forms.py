from __future__ import annotations

from django import forms

from config.limits import PERSON_NOTES_MAX_LENGTH
from people.models import ConsentStatus, Person, PersonKind


class PersonForm(forms.Form):
    display_name = forms.CharField(
        label="Name", max_length=200, error_messages={"required": "A name is required."}
    )
    aliases = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Other names, separated by commas (e.g. Grandma, Nana).",
    )
    kind = forms.ChoiceField(choices=PersonKind.choices, initial=PersonKind.HUMAN)
    notes = forms.CharField(
        required=False, max_length=PERSON_NOTES_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 3})
    )

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

    @classmethod
    def initial_for(cls, person: Person) -> dict:
        return {
            "display_name": person.display_name,
            "aliases": ", ".join(person.aliases),
            "kind": person.kind,
            "notes": person.notes,
        }


class ConsentForm(forms.Form):
    status = forms.ChoiceField(
        choices=ConsentStatus.choices,
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "Choose granted, pending or revoked."},
    )
    reason = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.TextInput(attrs={"placeholder": "Optional: why (e.g. asked her at lunch)"}),
    )
