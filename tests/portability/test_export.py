from __future__ import annotations

import io
import json
import zipfile

import yaml

from accounts.models import AccessToken
from portability.selectors import export_json, export_markdown_zip


def _by_id(rows):
    return {row["id"]: row for row in rows}


def test_export_has_schema_version_and_every_section(alice, journal):
    document = export_json(owner=alice)
    assert document["format"] == "keepsake-export"
    assert document["schema_version"] == 1
    assert document["exported_at"]
    assert document["account"]["username"] == "alice"
    for section in ("people", "consent_events", "memories", "edges", "agents", "records"):
        assert section in document
    json.dumps(document)  # plain JSON values only


def test_export_people_carry_aliases_notes_and_consent(alice, journal):
    people = _by_id(export_json(owner=alice)["people"])
    bob = people[str(journal.bob.pk)]
    assert bob["display_name"] == "Bob"
    assert bob["aliases"] == ["Bobby"]
    assert bob["notes"] == "Brother; loves chess."
    assert bob["consent_status"] == "granted"
    assert people[str(journal.carol.pk)]["consent_status"] == "pending"
    assert people[str(journal.dora.pk)]["consent_status"] == "revoked"
    assert people[str(journal.dora.pk)]["kind"] == "pet"
    assert [p["is_self"] for p in people.values()].count(True) == 1
    assert "owner" not in bob


def test_export_consent_history_in_order(alice, journal):
    events = [e for e in export_json(owner=alice)["consent_events"] if e["person"] == str(journal.dora.pk)]
    assert [(e["old_status"], e["new_status"]) for e in events] == [
        ("pending", "granted"),
        ("granted", "revoked"),
    ]
    assert events[1]["surface"] == "api"
    assert events[1]["reason"] == "Changed her mind"
    assert events[1]["actor"] == "alice"


def test_export_memories_have_participants_and_no_vector(alice, journal):
    memories = _by_id(export_json(owner=alice)["memories"])
    picnic = memories[str(journal.picnic.pk)]
    assert picnic["title"] == "Picnic by the lake"
    assert picnic["occurred_at"] == "2024-05-01T12:30:00+00:00"
    assert picnic["kind"] == "event"
    assert picnic["sensitivity"] == "personal"
    assert picnic["source_person"] == str(journal.carol.pk)
    assert sorted((p["person"], p["role"]) for p in picnic["participants"]) == sorted(
        [(str(journal.bob.pk), "present"), (str(journal.carol.pk), "source")]
    )
    assert "embedding_model" in picnic
    assert "embedding" not in picnic
    assert "search_vector" not in picnic
    assert memories[str(journal.lives_paris.pk)]["superseded_by"] == str(journal.lives_berlin.pk)
    assert memories[str(journal.solo.pk)]["participants"] == []


def test_export_edges_and_agents(alice, journal):
    document = export_json(owner=alice)
    edges = {(e["source"], e["target"], e["kind"]) for e in document["edges"]}
    assert (str(journal.lives_berlin.pk), str(journal.lives_paris.pk), "supersedes") in edges
    assert (str(journal.picnic.pk), str(journal.lives_berlin.pk), "similar") in edges
    agents = {a["name"]: a for a in document["agents"]}
    assert agents["Gardener"]["instructions"] == "Help with plants."
    assert {"Caregiver", "Reviewer", "Tutor", "Brainstorm"} <= set(agents)


def test_export_token_metadata_without_secrets(alice, journal):
    document = export_json(owner=alice)
    tokens = document["records"]["accounts.accesstoken"]
    assert {t["name"] for t in tokens} == {"laptop", "garden bot"}
    for token in tokens:
        assert "secret_hash" not in token
    text = json.dumps(document)
    for token in AccessToken.objects.filter(owner=alice):
        assert token.secret_hash not in text


def test_export_contains_nothing_of_another_owner(alice, mallory, journal):
    from tests.portability.conftest import seed_journal

    mallorys = seed_journal(mallory)
    text = json.dumps(export_json(owner=alice))
    for obj in (mallorys.bob, mallorys.picnic, mallorys.agent):
        assert str(obj.pk) not in text
    document = export_json(owner=mallory)
    assert str(journal.picnic.pk) not in json.dumps(document)
    assert len(document["memories"]) == 4


def test_export_ids_are_stable_between_exports(alice, journal):
    first, second = export_json(owner=alice), export_json(owner=alice)
    first.pop("exported_at"), second.pop("exported_at")
    assert first == second


def test_markdown_zip_has_one_file_per_memory_with_front_matter(alice, journal):
    archive = zipfile.ZipFile(io.BytesIO(export_markdown_zip(owner=alice)))
    names = [name for name in archive.namelist() if name.startswith("keepsake-memories/")]
    assert len(names) == 4 == len(set(names))
    assert set(archive.namelist()) - set(names) == {
        "keepsake-people.md",
        "keepsake-circles.md",
        "keepsake-export.json",
    }
    picnic_name = next(name for name in names if str(journal.picnic.pk)[:8] in name)
    assert picnic_name == f"keepsake-memories/2024-05-01-picnic-by-the-lake-{journal.picnic.pk.hex[:8]}.md"
    text = archive.read(picnic_name).decode()
    assert text.startswith("---\n")
    _, header, body = text.split("---\n", 2)
    front = yaml.safe_load(header)
    assert front["date"] == "2024-05-01T12:30:00+00:00"
    assert front["title"] == "Picnic by the lake"
    assert front["kind"] == "event"
    assert front["sensitivity"] == "personal"
    assert sorted(front["people"], key=lambda p: p["name"]) == [
        {"name": "Bob", "role": "present"},
        {"name": "Carol", "role": "source"},
    ]
    assert front["told_by"] == "Carol"
    assert body.strip() == journal.picnic.body


def test_markdown_names_are_safe_and_unique_for_same_day_same_title(alice):
    from datetime import UTC, datetime

    from memories.services import memory_create

    when = datetime(2024, 1, 1, tzinfo=UTC)
    for _ in range(3):
        memory_create(
            owner=alice, title="../../etc/hosts «Été» \\ notes", body="Same title", occurred_at=when
        )
    names = [
        name
        for name in zipfile.ZipFile(io.BytesIO(export_markdown_zip(owner=alice))).namelist()
        if name.startswith("keepsake-memories/")
    ]
    assert len(set(names)) == 3
    for name in names:
        folder, filename = name.split("/")
        assert folder == "keepsake-memories"
        assert filename.startswith("2024-01-01-etchosts-ete-notes-")
        assert all(ch.isalnum() or ch in "-." for ch in filename)


def test_markdown_unicode_survives_yaml(alice, journal):
    archive = zipfile.ZipFile(io.BytesIO(export_markdown_zip(owner=alice)))
    name = next(n for n in archive.namelist() if journal.solo.pk.hex[:8] in n)
    text = archive.read(name).decode()
    assert "«vraiment»" in text
    assert yaml.safe_load(text.split("---\n")[1])["sensitivity"] == "sensitive"
