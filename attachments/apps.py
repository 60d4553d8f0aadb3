from __future__ import annotations

from django.apps import AppConfig


class AttachmentsConfig(AppConfig):
    name = "attachments"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from attachments import signals  # noqa: F401  (a deleted attachment's files go with it)

        register_heif()


def register_heif() -> None:
    """Let Pillow open HEIC/HEIF (iPhone photos) through pillow-heif's opener."""
    from pillow_heif import register_heif_opener

    register_heif_opener()
