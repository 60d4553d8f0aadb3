from __future__ import annotations

from django import forms
from django.contrib.auth.models import AbstractBaseUser

from circles.models import CIRCLE_DESCRIPTION_MAX_LENGTH, CIRCLE_NAME_MAX_LENGTH
from circles.services import INVITE_DEFAULT_DAYS
from config.limits import MEMORY_BODY_MAX_LENGTH, MEMORY_TITLE_MAX_LENGTH
from memories.models import Sensitivity
from people.models import Person


class CircleForm(forms.Form):
    name = forms.CharField(
        max_length=CIRCLE_NAME_MAX_LENGTH,
        error_messages={
            "required": "Give the circle a name.",
            "max_length": f"A circle's name is at most {CIRCLE_NAME_MAX_LENGTH} characters.",
        },
        widget=forms.TextInput(attrs={"placeholder": "e.g. Family, Care team"}),
    )
    description = forms.CharField(
        required=False,
        max_length=CIRCLE_DESCRIPTION_MAX_LENGTH,
        error_messages={
            "max_length": f"A description is at most {CIRCLE_DESCRIPTION_MAX_LENGTH} characters.",
        },
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "What is this circle for?"}),
    )

    def clean_name(self) -> str:
        name = " ".join(self.cleaned_data["name"].split())
        if not name:
            raise forms.ValidationError("Give the circle a name.")
        return name

    @classmethod
    def initial_for(cls, circle) -> dict:
        return {"name": circle.name, "description": circle.description}


INVITE_DAY_CHOICES = [(7, "7 days"), (14, "14 days"), (30, "30 days")]


class InviteForm(forms.Form):
    days = forms.TypedChoiceField(
        label="Link works for",
        choices=INVITE_DAY_CHOICES,
        coerce=int,
        initial=INVITE_DEFAULT_DAYS,
        error_messages={"invalid_choice": "Choose 7, 14 or 30 days."},
    )


# What each sensitivity means inside a circle (SPEC §4), said where it is chosen.
CIRCLE_SENSITIVITY_CHOICES = [
    (Sensitivity.PUBLIC, "Public — every member"),
    (Sensitivity.PERSONAL, "Personal — only members it is about"),
    (Sensitivity.SENSITIVE, "Sensitive — only the member it is about"),
]


class CircleMemoryForm(forms.Form):
    """A memory written from a circle's page: saved in the writer's journal, shared into the circle."""

    # The same limits as the journal's own memory form and the API (config/limits.py).
    body = forms.CharField(
        max_length=MEMORY_BODY_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "What happened? What should they remember?"}),
        error_messages={"required": "Write something: a memory needs a body."},
    )
    title = forms.CharField(max_length=MEMORY_TITLE_MAX_LENGTH, required=False)
    sensitivity = forms.ChoiceField(
        label="Who in the circle sees it",
        choices=CIRCLE_SENSITIVITY_CHOICES,
        initial=Sensitivity.PUBLIC,
        error_messages={"invalid_choice": "Choose public, personal or sensitive."},
    )
    people = forms.ModelMultipleChoiceField(
        label="Who it is about",
        queryset=Person.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="From your journal. Everyone ticked must have consented to this circle.",
        error_messages={"invalid_choice": "Pick people from your journal."},
    )

    def __init__(self, *args, owner: AbstractBaseUser, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Only the writer's own people: another journal's person is "not one of the choices".
        self.fields["people"].queryset = Person.objects.filter(owner=owner)

    def clean_body(self) -> str:
        body = self.cleaned_data["body"].strip()
        if not body:
            raise forms.ValidationError("Write something: a memory needs a body.")
        return body
