"""Which pg_dump / pg_restore a backup runs: the package's for the embedded server, else a new enough one."""

from __future__ import annotations

import shutil

import pytest

from backups import services
from backups.services import BackupError, DatabaseTarget, database_in_use, postgres_binary

EMBEDDED_BIN = services._embedded_binary("pg_dump").parent
ELSEWHERE = DatabaseTarget(name="keepsake", user="keepsake", host="db.example.org", port="5432")


def test_the_embedded_server_uses_the_embedded_packages_programs(db):
    assert postgres_binary("pg_dump", database_in_use(), server_major=1) == str(EMBEDDED_BIN / "pg_dump")
    assert postgres_binary("pg_restore", database_in_use(), server_major=1) == str(
        EMBEDDED_BIN / "pg_restore"
    )


def test_another_server_uses_path_when_it_is_new_enough(monkeypatch, tmp_path):
    fake = tmp_path / "pg_dump"
    fake.write_text("#!/bin/sh\necho 'pg_dump (PostgreSQL) 17.2'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))

    assert postgres_binary("pg_dump", ELSEWHERE, server_major=17) == str(fake)
    # Older than the server: pg_dump would refuse it, so the package's newer one is used.
    assert postgres_binary("pg_dump", ELSEWHERE, server_major=18) == str(EMBEDDED_BIN / "pg_dump")


def test_no_program_new_enough_is_an_error_naming_the_version(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert shutil.which("pg_dump") is None

    with pytest.raises(BackupError, match="No pg_dump of PostgreSQL 99 or newer"):
        postgres_binary("pg_dump", ELSEWHERE, server_major=99)


def test_the_password_stays_out_of_the_command_line_and_the_repr():
    target = DatabaseTarget(name="keepsake", user="keepsake", password="s3cret", host="db", port="5432")

    assert "s3cret" not in target.conninfo()
    assert "s3cret" not in repr(target)
    assert target.environment()["PGPASSWORD"] == "s3cret"
