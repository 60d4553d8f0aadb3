from __future__ import annotations

from django.apps import AppConfig


class PortabilityConfig(AppConfig):
    """Your data: export, import and account deletion."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "portability"
    verbose_name = "Export, import and delete"
