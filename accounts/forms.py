from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.db.models import QuerySet

from accounts.models import TokenKind
from agents.models import Agent


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


class TokenCreateForm(forms.Form):
    """A new access token: a name to tell it apart, and whom it acts as (the owner or one agent)."""

    OWNER = "owner"

    name = forms.CharField(
        max_length=100,
        required=False,
        help_text="What will use it, so you can tell your tokens apart — “Laptop scripts”, “Claude Desktop”.",
    )
    acts_as = forms.ChoiceField(
        label="Acts as",
        help_text="An owner token reads and writes your whole journal through the API. An agent token "
        "reads only memories everyone in them has consented to, never writes, and is the one MCP takes.",
    )

    def __init__(self, *args: object, agents: QuerySet[Agent], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.agents = {str(agent.pk): agent for agent in agents}
        agent_choices = [(pk, f"{agent.name} — agent token") for pk, agent in self.agents.items()]
        self.fields["acts_as"].choices = [(self.OWNER, "You — owner token"), ("Your agents", agent_choices)]

    @property
    def kind(self) -> str:
        return TokenKind.OWNER if self.cleaned_data["acts_as"] == self.OWNER else TokenKind.AGENT

    @property
    def agent(self) -> Agent | None:
        return self.agents.get(self.cleaned_data["acts_as"])


class SecondFactorForm(forms.Form):
    """The second step of a sign-in: a code from the app, or a recovery code."""

    code = forms.CharField(
        label="Code",
        max_length=40,
        help_text="The 6-digit code your authenticator app shows, or one of your recovery codes.",
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "autocapitalize": "none", "spellcheck": "false"}
        ),
    )


class TotpConfirmForm(forms.Form):
    """Enrolment: the code the app made from the secret just scanned."""

    code = forms.CharField(
        label="Code from the app",
        max_length=12,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "pattern": "[0-9 ]*"}
        ),
    )


class TwoFactorDisableForm(forms.Form):
    """Turning two-factor off: the password, or a current code (either one is enough)."""

    password = forms.CharField(
        label="Your password",
        required=False,
        max_length=4096,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
    )
    code = forms.CharField(
        label="Or a code from the app, or a recovery code",
        required=False,
        max_length=40,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autocapitalize": "none"}),
    )

    def clean(self):
        cleaned = super().clean()
        if not cleaned.get("password") and not cleaned.get("code"):
            raise forms.ValidationError("Give your password or a code.")
        return cleaned
