from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from portability.parsing import human_size, import_max_bytes


class ImportForm(forms.Form):
    file = forms.FileField(
        label="File to import",
        help_text="A Keepsake export (.json) or a Day One JSON export (.json, or the .zip Day One makes).",
        widget=forms.ClearableFileInput(attrs={"accept": ".json,.zip,application/json,application/zip"}),
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        limit = import_max_bytes()
        # Checked before the file is read: a huge upload is refused without loading it.
        if upload.size > limit:
            size, allowed = human_size(upload.size), human_size(limit)
            raise ValidationError(f"Nothing was imported. The file is {size}; the limit is {allowed}.")
        return upload


class AccountDeleteForm(forms.Form):
    password = forms.CharField(
        label="Your password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="Deleting your account removes every person, memory, agent, token and import of yours. "
        "It cannot be undone: download an export first.",
    )
