"""Password rules of our own, listed in settings.AUTH_PASSWORD_VALIDATORS."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from config.limits import PASSWORD_MAX_LENGTH


class MaximumLengthValidator:
    """Refuse absurdly long passwords (sign-up and password change) with a clear message.

    Nobody types more than PASSWORD_MAX_LENGTH characters; a 100 000-character
    "password" only makes the server hash and compare megabytes.
    """

    def __init__(self, max_length: int = PASSWORD_MAX_LENGTH) -> None:
        self.max_length = max_length

    def validate(self, password: str, user: object = None) -> None:
        if len(password) > self.max_length:
            raise ValidationError(
                f"This password is too long: {self.max_length} characters at most.",
                code="password_too_long",
            )

    def get_help_text(self) -> str:
        return f"Your password can be at most {self.max_length} characters."
