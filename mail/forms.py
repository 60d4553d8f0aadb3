from __future__ import annotations

from django import forms
from django.contrib.auth.forms import SetPasswordForm


class EmailAddressForm(forms.Form):
    address = forms.EmailField(
        label="E-mail address",
        max_length=254,
        help_text="We send a link to it; it becomes your address once you follow the link.",
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )


class DigestForm(forms.Form):
    daily_digest = forms.BooleanField(
        label="Send me a daily digest",
        required=False,
        help_text="Once a day, if there is something new: your inbox's notifications and your own memories "
        "from this day in earlier years. Only to your verified address.",
    )


class PasswordResetRequestForm(forms.Form):
    address = forms.EmailField(
        label="Your verified e-mail address",
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
    )


class SetNewPasswordForm(SetPasswordForm):
    """Django's, so the same password validators apply as at sign-up."""


class InvitationForm(forms.Form):
    to = forms.CharField(
        label="E-mail address or username",
        max_length=254,
        help_text="An e-mail address gets the link by e-mail; a username gets it in their Keepsake inbox.",
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "spellcheck": "false", "autocapitalize": "none"}
        ),
    )
