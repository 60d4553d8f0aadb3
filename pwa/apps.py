from __future__ import annotations

from django.apps import AppConfig


class PwaConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "pwa"
    verbose_name = "Installable app: manifest, service worker, offline captures"
