"""`python manage.py restore <backup> [--target NAME|URL] [--force]`: restore a verified backup."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from backups.selectors import backup_find
from backups.services import BackupError, RestoreReport, backup_restore, database_in_use, database_target


class Command(BaseCommand):
    help = (
        "Restore a backup made by `manage.py backup`: checks the dump's sha256 against its manifest, "
        "refuses a database that has data unless --force, restores with pg_restore (clean, no owner, "
        "one transaction) and compares the row counts with the manifest."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "backup",
            help="The manifest (.json) or dump (.dump), a file name in KEEPSAKE_BACKUP_DIR, or `latest` "
            "(the newest backup of the database in use).",
        )
        parser.add_argument(
            "--target",
            help="Database to restore into: a name on the same server, or a postgres:// URL "
            "(default: the database in use).",
        )
        parser.add_argument("--force", action="store_true", help="Replace a database that has data.")

    def handle(self, *args, backup: str, target: str | None, force: bool, **options) -> None:
        database = database_target(target)
        try:
            # `latest`: the newest backup of the database in use, wherever it is restored to.
            found = backup_find(backup, database=database_in_use().name)
            report = backup_restore(backup=found, target=database, force=force)
        except (BackupError, FileNotFoundError) as error:
            raise CommandError(str(error)) from error
        self._report(report)
        if not report.matches:
            raise CommandError("Some row counts differ from the manifest (✗ above).")

    def _report(self, report: RestoreReport) -> None:
        out = self.stdout.write
        manifest = report.backup.manifest
        out(f"Checksum OK: {report.backup.dump_path.name} (sha256 {manifest['sha256'][:16]}…)")
        made = f"{manifest['database']} made {manifest['created_at']}"
        out(f"Restored the backup of {made} into {report.database}.")
        width = max(len(table.table) for table in report.tables) if report.tables else 5
        out(f"  {'table':<{width}} {'backup':>9} {'restored':>9}")
        for table in report.tables:
            restored = "missing" if table.restored is None else f"{table.restored:,}"
            mark = "✓" if table.matches else "✗"
            out(f"  {table.table:<{width}} {table.in_backup:>9,} {restored:>9} {mark}")
        if report.backup.manifest.get("photos_file"):
            out(f"Photo files put back into the store: {report.photos_restored}.")
        if report.matches:
            out(self.style.SUCCESS(f"All {len(report.tables)} tables match the manifest."))
