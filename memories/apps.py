from __future__ import annotations

from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "memories"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Every process that loads the app (web, worker, commands, benches): config/blas.py.
        from config.blas import limit_blas_threads

        limit_blas_threads()
