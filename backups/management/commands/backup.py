"""`python manage.py backup [--dir DIR] [--keep N]`: dump the database in use with a manifest."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backups.services import BackupError, backup_create


class Command(BaseCommand):
    help = (
        "Back up the database in use: a consistent pg_dump (custom format, one snapshot) and a JSON "
        "manifest (time, database, server version, migration heads, row counts, sha256) in "
        "KEEPSAKE_BACKUP_DIR; keeps the newest KEEPSAKE_BACKUP_KEEP backups of this database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dir", type=Path, help="Directory (default: KEEPSAKE_BACKUP_DIR).")
        parser.add_argument("--keep", type=int, help="Backups to keep (default: KEEPSAKE_BACKUP_KEEP).")

    def handle(self, *args, dir: Path | None, keep: int | None, **options) -> None:
        try:
            backup = backup_create(directory=dir, keep=keep)
        except BackupError as error:
            raise CommandError(str(error)) from error
        manifest = backup.manifest
        rows = sum(manifest["row_counts"].values())
        self.stdout.write(
            self.style.SUCCESS(
                f"Backed up {manifest['database']} (PostgreSQL {manifest['server_version']}): "
                f"{manifest['dump_bytes']:,} bytes, {rows:,} rows in {len(manifest['row_counts'])} tables."
            )
        )
        self.stdout.write(f"  {backup.dump_path}\n  {backup.manifest_path}")
