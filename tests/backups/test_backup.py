"""Backup and restore against the real server: pytest-django's test database is dumped
(pg_dump, one snapshot), restored into a fresh database on the same server, and every row
checked there. Transactional: pg_dump reads from its own connection, so the data must be
committed."""

from __future__ import annotations

import json
import os
import time
from io import StringIO
from urllib.parse import quote

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from psycopg import sql

from backups import tasks
from backups.selectors import backup_list, backup_read
from backups.services import (
    BackupError,
    backup_create,
    backup_restore,
    database_in_use,
    file_sha256,
)
from memories.models import Memory, MemoryParticipant
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentEvent, ConsentStatus, Person
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db(transaction=True)

try:
    from circles.models import MemoryShare
except ImportError:  # pragma: no cover - circles predates this test; kept optional on purpose
    MemoryShare = None


@pytest.fixture
def backup_dir(tmp_path, settings):
    settings.KEEPSAKE_BACKUP_DIR = tmp_path / "backups"
    return settings.KEEPSAKE_BACKUP_DIR


@pytest.fixture
def empty_database():
    """A fresh, empty database on the test server, named after the test database (unique per run)."""
    target = database_in_use().on_database(f"{connection.settings_dict['NAME']}_restore")

    def drop(admin: psycopg.Connection) -> None:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(target.name)))

    with database_in_use().on_database("postgres").connect(autocommit=True) as admin:
        drop(admin)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(target.name)))
    try:
        yield target
    finally:
        with database_in_use().on_database("postgres").connect(autocommit=True) as admin:
            drop(admin)


@pytest.fixture
def journal(alice):
    """Alice's journal: people with consent history, memories with participants, a circle share."""
    bob = person_create(owner=alice, display_name="Bob")
    carol = person_create(owner=alice, display_name="Carol", aliases=["Caz"], notes="Carol's notes")
    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice, reason="asked at dinner")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    person_set_consent(person=carol, status=ConsentStatus.REVOKED, actor=alice, reason="changed her mind")
    memories = [
        memory_create(owner=alice, body="Picnic by the river with Bob", participants=[ParticipantSpec(bob)]),
        memory_create(
            owner=alice,
            title="Carol's news",
            body="Carol starts chemo on Monday",
            participants=[ParticipantSpec(carol), ParticipantSpec(bob, role="present")],
            source_person=bob,
        ),
        memory_create(owner=alice, body="The farmers' market moved to Saturdays", sensitivity="public"),
    ]
    if MemoryShare is not None:
        from circles.services import circle_create, memory_share

        memory_share(memory=memories[2], circle=circle_create(owner=alice, name="Family"), by=alice)
    return memories


def _ids(target, table: str) -> set[str]:
    with target.connect() as restored:
        rows = restored.execute(sql.SQL("SELECT id::text FROM {}").format(sql.Identifier(table))).fetchall()
    return {row[0] for row in rows}


def _as_text(values) -> set[str]:
    return {str(value) for value in values}


def test_backup_writes_a_custom_format_dump_and_a_manifest_describing_it(alice, journal, backup_dir):
    backup = backup_create()

    assert backup.dump_path.parent == backup.manifest_path.parent == backup_dir
    assert backup.dump_path.read_bytes()[:5] == b"PGDMP"  # pg_dump's custom format
    # The whole journal is in there: readable by its owner only.
    assert backup.dump_path.stat().st_mode & 0o777 == 0o600
    assert backup.manifest_path.stat().st_mode & 0o777 == 0o600
    assert backup_dir.stat().st_mode & 0o777 == 0o700
    manifest = json.loads(backup.manifest_path.read_text())
    assert manifest == backup.manifest
    assert manifest["database"] == connection.settings_dict["NAME"]
    assert manifest["sha256"] == file_sha256(backup.dump_path)
    assert manifest["dump_bytes"] == backup.dump_path.stat().st_size
    assert manifest["server_version"].split(".")[0].isdigit()
    assert manifest["migrations"]["memories"] and manifest["migrations"]["people"]
    counts = manifest["row_counts"]
    assert counts["memories_memory"] == Memory.objects.count() == 3
    assert counts["memories_memoryparticipant"] == MemoryParticipant.objects.count()
    assert counts["people_person"] == Person.objects.count()
    assert counts["people_consentevent"] == ConsentEvent.objects.count()
    assert counts["auth_user"] == 1
    if MemoryShare is not None:
        assert counts["circles_memoryshare"] == 1


def test_restore_into_an_empty_database_brings_back_every_row(alice, journal, backup_dir, empty_database):
    backup = backup_create()
    out = StringIO()

    call_command("restore", str(backup.manifest_path), "--target", empty_database.name, stdout=out)

    assert "Checksum OK" in out.getvalue()
    assert f"All {len(backup.manifest['row_counts'])} tables match the manifest." in out.getvalue()
    assert _ids(empty_database, "memories_memory") == _as_text(Memory.objects.values_list("pk", flat=True))
    assert _ids(empty_database, "people_person") == _as_text(Person.objects.values_list("pk", flat=True))
    assert _ids(empty_database, "people_consentevent") == _as_text(
        ConsentEvent.objects.values_list("pk", flat=True)
    )
    assert _ids(empty_database, "memories_memoryparticipant") == _as_text(
        MemoryParticipant.objects.values_list("pk", flat=True)
    )
    if MemoryShare is not None:
        assert _ids(empty_database, "circles_memoryshare") == _as_text(
            MemoryShare.objects.values_list("pk", flat=True)
        )
    # The text and consent come back, not only the ids.
    with empty_database.connect() as restored:
        body, sensitivity = restored.execute(
            "SELECT body, sensitivity FROM memories_memory WHERE title = %s", ["Carol's news"]
        ).fetchone()
        carol = restored.execute(
            "SELECT consent_status FROM people_person WHERE display_name = 'Carol'"
        ).fetchone()
    assert (body, sensitivity, carol[0]) == ("Carol starts chemo on Monday", "sensitive", "revoked")
    # The search's narrow text copy comes back once per memory (its triggers are
    # created after the rows are restored, so nothing is copied twice), and keeps working.
    with empty_database.connect() as restored:
        copies = restored.execute("SELECT memory_id::text FROM memories_memorytext").fetchall()
        restored.execute(
            "UPDATE memories_memory SET body = body || ' and a zeppelin' WHERE title = %s", ["Carol's news"]
        )
        copied = restored.execute(
            "SELECT count(*) FROM memories_memorytext "
            "WHERE search_vector @@ to_tsquery('english', 'zeppelin')"
        ).fetchone()[0]
    assert sorted(row[0] for row in copies) == sorted(_as_text(Memory.objects.values_list("pk", flat=True)))
    assert copied == 1


def test_restore_by_url_and_into_a_database_with_data_only_with_force(
    alice, journal, backup_dir, empty_database
):
    backup = backup_create()
    settings_dict = connection.settings_dict
    # A socket directory goes in the path, percent-encoded (django-environ's form for DATABASE_URL).
    socket = quote(settings_dict["HOST"], safe="")
    url = f"postgres://{settings_dict['USER']}@:{settings_dict['PORT']}/{socket}/{empty_database.name}"
    call_command("restore", str(backup.dump_path), "--target", url, stdout=StringIO())

    with pytest.raises(CommandError, match="already has data"):
        call_command("restore", str(backup.manifest_path), "--target", empty_database.name, stdout=StringIO())

    report = backup_restore(backup=backup, target=empty_database, force=True)
    assert report.matches
    assert {table.table: table.restored for table in report.tables} == backup.manifest["row_counts"]


def test_a_tampered_dump_is_refused_and_nothing_is_restored(alice, journal, backup_dir, empty_database):
    backup = backup_create()
    data = bytearray(backup.dump_path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    backup.dump_path.write_bytes(bytes(data))

    with pytest.raises(CommandError, match="Checksum mismatch"):
        call_command("restore", str(backup.manifest_path), "--target", empty_database.name, stdout=StringIO())
    with pytest.raises(BackupError, match="Checksum mismatch"):
        backup_restore(backup=backup_read(backup.manifest_path), target=empty_database)

    with empty_database.connect() as untouched:
        assert untouched.execute("SELECT to_regclass('memories_memory')").fetchone() == (None,)


def test_a_manifest_edited_to_match_another_dump_is_refused(alice, journal, backup_dir, empty_database):
    backup = backup_create()
    manifest = dict(backup.manifest, sha256="0" * 64)
    backup.manifest_path.write_text(json.dumps(manifest))

    with pytest.raises(CommandError, match="Checksum mismatch"):
        call_command("restore", backup.manifest_path.name, "--target", empty_database.name, stdout=StringIO())


def test_rotation_keeps_the_newest_n_backups_of_the_database(alice, backup_dir, settings):
    settings.KEEPSAKE_BACKUP_KEEP = 2
    other_database = backup_dir / "otherdb-20200101T000000Z.json"
    backup_dir.mkdir(parents=True)
    other_database.write_text(
        json.dumps({"database": "otherdb", "created_at": "2020-01-01T00:00:00+00:00", "dump_file": "x.dump"})
    )

    name = connection.settings_dict["NAME"]
    died_yesterday = backup_dir / f".{name}-20200101T000000Z.dump.partial"
    running_now = backup_dir / f".{name}-20200101T000001Z.dump.partial"
    for leftover in (died_yesterday, running_now):
        leftover.write_bytes(b"PGDMP")
    day_ago = time.time() - 25 * 3600
    os.utime(died_yesterday, (day_ago, day_ago))

    made = [backup_create() for _ in range(3)]

    kept = backup_list(directory=backup_dir, database=connection.settings_dict["NAME"])
    assert [backup.manifest_path for backup in kept] == [made[2].manifest_path, made[1].manifest_path]
    assert not made[0].dump_path.exists() and not made[0].manifest_path.exists()
    assert len(list(backup_dir.glob("*.dump"))) == 2
    assert other_database.exists()  # another database's backups are not this rotation's business
    assert not died_yesterday.exists() and running_now.exists()


def test_backup_command_and_nightly_task_write_to_the_configured_directory(alice, backup_dir, settings):
    settings.KEEPSAKE_BACKUP_KEEP = 1
    out = StringIO()
    call_command("backup", stdout=out)
    assert "Backed up" in out.getvalue()

    manifest_name = tasks.nightly_backup()

    [only] = backup_list(directory=backup_dir)
    assert only.manifest_path.name == manifest_name
    assert settings.CELERY_BEAT_SCHEDULE["backups-nightly"]["task"] == tasks.nightly_backup.name


def test_restore_latest_restores_the_newest_backup_of_the_database_in_use(alice, backup_dir, empty_database):
    backup_create()
    person_create(owner=alice, display_name="Dana")
    newest = backup_create()
    out = StringIO()

    call_command("restore", "latest", "--target", empty_database.name, stdout=out)

    assert newest.dump_path.name in out.getvalue()
    with empty_database.connect() as restored:
        assert restored.execute(
            "SELECT count(*) FROM people_person WHERE display_name = 'Dana'"
        ).fetchone() == (1,)


def test_restore_latest_without_backups_says_so(alice, backup_dir):
    with pytest.raises(CommandError, match="No backups of"):
        call_command("restore", "latest", stdout=StringIO())
