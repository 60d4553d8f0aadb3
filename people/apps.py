from __future__ import annotations

from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "people"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from people import signals  # noqa: F401  (connects the photo clean-up)
