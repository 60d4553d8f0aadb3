from __future__ import annotations

from django.apps import AppConfig


class LinkedConfig(AppConfig):
    """Linked people (SPEC §4): link invitations, unlinking, My consents, requests to the person."""

    name = "linked"
    default_auto_field = "django.db.models.BigAutoField"
