"""Reading backups: where they are, what their manifests say, and the rows a database holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg
from django.apps import apps
from django.conf import settings
from psycopg import sql

MANIFEST_SUFFIX = ".json"
DUMP_SUFFIX = ".dump"


@dataclass(frozen=True)
class Backup:
    """A dump file and the JSON manifest beside it."""

    dump_path: Path
    manifest_path: Path
    manifest: dict

    @property
    def database(self) -> str:
        return self.manifest["database"]

    @property
    def created_at(self) -> datetime:
        return datetime.fromisoformat(self.manifest["created_at"])


def backup_directory() -> Path:
    return Path(settings.KEEPSAKE_BACKUP_DIR)


def backup_read(manifest_path: Path) -> Backup:
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    return Backup(
        dump_path=manifest_path.with_name(manifest["dump_file"]),
        manifest_path=manifest_path,
        manifest=manifest,
    )


def backup_list(*, directory: Path, database: str | None = None) -> list[Backup]:
    """The backups in `directory` (of one database, if given), newest first.

    Only complete backups: a manifest is written after its dump is, so a dump
    without one (a crash mid-backup) is not listed.
    """
    if not directory.is_dir():
        return []
    backups = []
    for manifest_path in directory.glob(f"*{MANIFEST_SUFFIX}"):
        try:
            backup = backup_read(manifest_path)
        except (OSError, ValueError, KeyError):
            continue  # not one of ours
        if database is None or backup.database == database:
            backups.append(backup)
    return sorted(backups, key=lambda backup: backup.created_at, reverse=True)


def backup_find(spec: str, *, database: str | None = None) -> Backup:
    """The backup a user named: a manifest or dump path, a file name in the backup
    directory, or `latest` (the newest of `database`). FileNotFoundError if none."""
    directory = backup_directory()
    if spec == "latest":
        found = backup_list(directory=directory, database=database)
        if not found:
            raise FileNotFoundError(f"No backups of {database or 'any database'} in {directory}.")
        return found[0]
    path = Path(spec)
    if not path.exists() and not path.is_absolute():
        path = directory / spec
    if path.suffix == DUMP_SUFFIX or not path.suffix:
        path = path.with_suffix(MANIFEST_SUFFIX)
    if not path.is_file():
        raise FileNotFoundError(f"No backup manifest at {path}.")
    return backup_read(path)


def counted_tables() -> list[str]:
    """The tables whose rows a manifest counts: every table of Keepsake's own apps, and the users.

    Found from the app registry, so a new app's tables are counted without a change here.
    """
    base_dir = Path(settings.BASE_DIR).resolve()
    tables = {apps.get_model(settings.AUTH_USER_MODEL)._meta.db_table}
    for app_config in apps.get_app_configs():
        path = Path(app_config.path).resolve()
        if not path.is_relative_to(base_dir) or ".venv" in path.parts:
            continue
        for model in app_config.get_models(include_auto_created=True):
            if model._meta.managed and not model._meta.proxy:
                tables.add(model._meta.db_table)
    return sorted(tables)


def database_row_counts(cursor: psycopg.Cursor, tables: list[str]) -> dict[str, int]:
    """COUNT(*) of each table that exists, read in the cursor's transaction (its snapshot)."""
    cursor.execute(
        "SELECT name FROM unnest(%s::text[]) AS name WHERE to_regclass(name) IS NOT NULL", [tables]
    )
    present = [row[0] for row in cursor.fetchall()]
    counts = {}
    for table in present:
        cursor.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        counts[table] = cursor.fetchone()[0]
    return counts


def database_migration_heads(cursor: psycopg.Cursor) -> dict[str, list[str]]:
    """Per app, the last migration(s) applied in the cursor's database (its snapshot).

    A migration is a head when no migration of the same app that depends on it is
    applied too (the code's migration graph says which depend on which); one that
    the code no longer has counts only if it sorts last in its app.
    """
    from django.db.migrations.loader import MigrationLoader

    cursor.execute("SELECT to_regclass('django_migrations') IS NOT NULL")
    if not cursor.fetchone()[0]:
        return {}
    cursor.execute("SELECT app, name FROM django_migrations")
    applied = {(app, name) for app, name in cursor.fetchall()}
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    last_by_app: dict[str, str] = {}
    for app, name in applied:
        last_by_app[app] = max(name, last_by_app.get(app, name))
    heads: dict[str, list[str]] = {}
    for app, name in applied:
        node = graph.node_map.get((app, name))
        if node is None:
            is_head = name == last_by_app[app]
        else:
            is_head = not any(child.key in applied and child.key[0] == app for child in node.children)
        if is_head:
            heads.setdefault(app, []).append(name)
    return {app: sorted(names) for app, names in sorted(heads.items())}
