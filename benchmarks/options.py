"""Checks of the options the benchmark commands share."""

from __future__ import annotations

from django.core.management.base import CommandError


def require_positive(options: dict, *names: str) -> None:
    """Refuse the first of these options that is not above zero."""
    for name in names:
        if options[name] <= 0:
            raise CommandError(f"--{name} must be positive.")
