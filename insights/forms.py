from __future__ import annotations

from django import forms

from insights.services import MAX_INSIGHT_LENGTH
from memories.models import Sensitivity

WORK_IT_OUT = ""


class InsightForm(forms.Form):
    text = forms.CharField(
        label="Insight",
        max_length=MAX_INSIGHT_LENGTH,
        widget=forms.Textarea(
            attrs={"rows": 4, "placeholder": "e.g. Visual fraction models help concrete thinkers."},
        ),
        help_text="What you learnt, said so that no one could tell whom or what it came from.",
        error_messages={"required": "Write the insight first."},
    )
    sensitivity = forms.ChoiceField(
        choices=[(WORK_IT_OUT, "Work it out"), *Sensitivity.choices],
        required=False,
        help_text="Public lets a circle you share it into show it to every member.",
    )
    # The warnings the owner was shown (their keys) and whether they ticked "I checked these".
    confirmed = forms.MultipleChoiceField(required=False, widget=forms.MultipleHiddenInput)
    confirm = forms.BooleanField(
        required=False, label="I have checked these details: they do not reveal the source."
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Any key may come back: insight_create compares them with what the text raises now.
        keys = self.data.getlist("confirmed") if hasattr(self.data, "getlist") else []
        self.fields["confirmed"].choices = [(key, key) for key in keys]

    def clean_sensitivity(self) -> str | None:
        return self.cleaned_data.get("sensitivity") or None

    @property
    def confirmed_warnings(self) -> list[str]:
        if not self.is_valid() or not self.cleaned_data["confirm"]:
            return []
        return list(self.cleaned_data["confirmed"])
