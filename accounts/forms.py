from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm


class SignupForm(UserCreationForm):
    """Validates a new account (unique username, matching passwords, password rules).

    It never saves: the account is created by accounts.services.user_signup,
    which also creates the Self person and the built-in agents.
    """

    email = forms.EmailField(required=False, help_text="Optional.")

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")

    def save(self, commit: bool = True):
        raise NotImplementedError("Use accounts.services.user_signup.")
