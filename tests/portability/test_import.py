from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from memories.models import Memory, MemoryEdge
from people.models import ConsentEvent, Person
from portability.models import ImportedItem, ImportJob, ImportStatus
from portability.selectors import export_json
from portability.services import import_start
from tests.portability.conftest import run_import

FIXTURES = Path(__file__).parent / "fixtures"

# Worker bookkeeping and derived timestamps: recomputed in the new account, not content.
VOLATILE = {
    "id",
    "created_at",
    "updated_at",
    "embedding_model",
    "embedded_at",
    "embedding_claimed_at",
    "edges_computed_at",
    "supersession_checked_at",
    "expired_at",
    # When an import wrote a consent event: the one label the new account adds to its history.
    "imported_at",
}


def comparable(document: dict) -> dict:
    """The export's content with ids replaced by what they point at, in a stable order.

    Each reference (participant, source person, supersession, edge end, consent
    event) becomes the referenced object's identifying content, so two exports
    of the same journal in different accounts compare equal, and a reference
    pointing at the wrong object does not.
    """
    username = document["account"]["username"]

    def user(value):
        return "<owner>" if value == username else value

    person_label = {p["id"]: f"{p['display_name']}|self={p['is_self']}" for p in document["people"]}
    memory_label = {m["id"]: f"{m['title']}|{m['body']}|{m['occurred_at']}" for m in document["memories"]}

    def strip(row: dict) -> dict:
        return {key: value for key, value in row.items() if key not in VOLATILE}

    people = [strip({**p, "linked_user": user(p["linked_user"])}) for p in document["people"]]
    for person in people:
        if person["is_self"]:
            # Self's consent dates from the account's sign-up: a creation timestamp.
            person.pop("consent_updated_at")
    events = [
        strip({**e, "person": person_label[e["person"]], "actor": user(e["actor"])})
        for e in document["consent_events"]
    ]
    events.append({"created_at_kept": sorted(e["created_at"] for e in document["consent_events"])})
    memories = []
    for m in document["memories"]:
        row = strip(m)
        row["source_person"] = person_label.get(m["source_person"])
        row["superseded_by"] = memory_label.get(m["superseded_by"])
        row["participants"] = sorted((person_label[p["person"]], p["role"]) for p in m["participants"])
        memories.append(row)
    edges = [
        strip({**e, "source": memory_label[e["source"]], "target": memory_label[e["target"]]})
        for e in document["edges"]
    ]
    agents = [strip(a) for a in document["agents"]]

    def ordered(rows):
        return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))

    return {
        "people": ordered(people),
        "consent_events": ordered(events),
        "memories": ordered(memories),
        "edges": ordered(edges),
        "agents": ordered(agents),
    }


def _export_bytes(owner) -> bytes:
    return json.dumps(export_json(owner=owner)).encode()


def test_round_trip_export_import_export_gives_the_same_content(alice, journal, bea):
    original = export_json(owner=alice)
    job = run_import(bea, filename="alice.json", content=json.dumps(original).encode())
    assert job.status == ImportStatus.DONE
    assert job.skipped_count == 0, job.skipped
    again = export_json(owner=bea)
    assert comparable(again) == comparable(original)
    # The comparison is not vacuous: every section has content.
    assert all(comparable(original)[section] for section in ("people", "consent_events", "memories", "edges"))


def test_round_trip_comparison_notices_a_difference(alice, journal, bea):
    original = export_json(owner=alice)
    run_import(bea, filename="alice.json", content=json.dumps(original).encode())
    Person.objects.filter(owner=bea, display_name="Carol").update(consent_status="granted")
    assert comparable(export_json(owner=bea)) != comparable(original)


def test_imported_consent_is_kept_only_when_history_backs_it(alice, journal, bea):
    document = export_json(owner=alice)
    run_import(bea, filename="alice.json", content=json.dumps(document).encode())
    statuses = dict(Person.objects.filter(owner=bea).values_list("display_name", "consent_status"))
    assert statuses == {"Self": "granted", "Bob": "granted", "Carol": "pending", "Dora": "revoked"}


def test_claimed_consent_without_history_imports_as_pending(alice, journal, bea):
    document = export_json(owner=alice)
    carol_id = str(journal.carol.pk)
    for person in document["people"]:
        if person["id"] == carol_id:
            person["consent_status"] = "granted"  # edited by hand, no event behind it
    job = run_import(bea, filename="edited.json", content=json.dumps(document).encode())
    carol = Person.objects.get(owner=bea, display_name="Carol")
    assert carol.consent_status == "pending"
    notes = [entry for entry in job.skipped if not entry["skipped"]]
    assert notes and "Carol" in notes[0]["item"] and "pending" in notes[0]["reason"]


def test_broken_history_resets_to_pending_with_an_event(alice, journal, bea):
    document = export_json(owner=alice)
    bob_id = str(journal.bob.pk)
    document["consent_events"] = [
        {**e, "old_status": "revoked"} if e["person"] == bob_id else e for e in document["consent_events"]
    ]
    run_import(bea, filename="edited.json", content=json.dumps(document).encode())
    bob = Person.objects.get(owner=bea, display_name="Bob")
    assert bob.consent_status == "pending"
    last = ConsentEvent.objects.filter(person=bob).order_by("-created_at", "-id").first()
    assert (last.old_status, last.new_status) == ("granted", "pending")


def test_memory_refused_by_the_services_is_skipped_with_reason(alice, journal, bea):
    document = export_json(owner=alice)
    document["memories"][0]["body"] = "The door code and wifi password: hunter2hunter2"
    job = run_import(bea, filename="alice.json", content=json.dumps(document).encode())
    assert job.status == ImportStatus.DONE
    assert Memory.objects.filter(owner=bea).count() == 3
    assert job.skipped_count >= 1
    reasons = " ".join(entry["reason"] for entry in job.skipped if entry["skipped"])
    assert "not a secret store" in reasons


def test_memory_whose_person_was_skipped_is_skipped_too(alice, journal, bea):
    document = export_json(owner=alice)
    for person in document["people"]:
        if person["display_name"] == "Bob":
            person["display_name"] = "   "  # person_create refuses a blank name
    job = run_import(bea, filename="alice.json", content=json.dumps(document).encode())
    assert not Memory.objects.filter(owner=bea, title="Picnic by the lake").exists()
    reasons = [entry["reason"] for entry in job.skipped]
    assert any("consent" in reason for reason in reasons)
    # Memories that do not involve Bob are imported.
    assert Memory.objects.filter(owner=bea, body="Carol moved to Berlin.").exists()


def test_dayone_sample_import_keeps_dates(alice):
    content = (FIXTURES / "dayone_sample.json").read_bytes()
    job = run_import(alice, filename="Journal.json", content=content)
    assert job.format == "dayone"
    assert job.status == ImportStatus.DONE
    assert (job.total, job.imported, job.skipped_count) == (5, 3, 2)
    memories = {m.title or m.body[:20]: m for m in Memory.objects.filter(owner=alice)}
    birthday = memories["Grandma's 90th birthday"]
    assert birthday.occurred_at.isoformat() == "2019-06-14T18:32:05+00:00"
    assert birthday.kind == "event"  # from the "event" tag
    assert birthday.body.startswith("The whole family came to Lyon.")
    assert birthday.body.endswith("bakery again.")  # Day One's Markdown escape removed
    cello = next(m for m in memories.values() if "cello" in m.body)
    assert cello.occurred_at.isoformat() == "2021-11-02T07:05:00+00:00"
    assert (
        cello.body
        == "Started learning the cello today. First lesson: how to hold the bow without dropping it!"
    )
    boiler = next(m for m in memories.values() if "boiler" in m.body)
    assert boiler.kind == "task"  # tags match kinds case-insensitively
    reasons = {entry["item"]: entry["reason"] for entry in job.skipped}
    assert any("no text" in reason for reason in reasons.values())
    assert any("not a secret store" in reason for reason in reasons.values())
    assert not Memory.objects.filter(owner=alice, body__contains="h4ppyC4bin").exists()
    assert "h4ppyC4bin" not in json.dumps(job.skipped)  # the refused secret is not echoed


def test_dayone_zip_with_journal_json_is_accepted(alice):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("Journal.json", (FIXTURES / "dayone_sample.json").read_bytes())
        archive.writestr("photos/0cc175b9c0f1b6a831c399e269772661.jpeg", b"\xff\xd8\xff")
    job = run_import(alice, filename="export.zip", content=buffer.getvalue())
    assert (job.format, job.imported) == ("dayone", 3)


def test_importing_the_same_dayone_file_twice_makes_two_jobs_not_merged_rows(alice):
    content = (FIXTURES / "dayone_sample.json").read_bytes()
    first = run_import(alice, filename="Journal.json", content=content)
    ImportJob.objects.filter(pk=first.pk).update(status=ImportStatus.QUEUED)
    from portability.services import import_run

    import_run(job_id=first.pk)  # the same job again changes nothing
    assert Memory.objects.filter(owner=alice).count() == 3


def _malformed_cases() -> dict[str, bytes]:
    dayone = json.loads((FIXTURES / "dayone_sample.json").read_text())
    bad_date = json.loads(json.dumps(dayone))
    bad_date["entries"][3]["creationDate"] = "last Tuesday"
    duplicate = json.loads(json.dumps(dayone))
    duplicate["entries"][4]["uuid"] = duplicate["entries"][0]["uuid"]
    return {
        "not json": b"Dear diary, today I",
        "not utf-8": "\u00e9t\u00e9".encode("latin-1"),
        "empty": b"   ",
        "a list": b"[1, 2, 3]",
        "unknown object": b'{"notes": []}',
        "entries not a list": b'{"entries": {"uuid": "x"}}',
        "bad date in entry 4": json.dumps(bad_date).encode(),
        "duplicate uuid": json.dumps(duplicate).encode(),
        "zip without json": _zip({"readme.txt": b"hello"}),
        "broken zip": b"PK\x03\x04broken",
    }


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize("case", sorted(_malformed_cases()))
def test_malformed_file_is_refused_and_imports_nothing(alice, case):
    content = _malformed_cases()[case]
    before = (Memory.objects.count(), Person.objects.count())
    with pytest.raises(ValidationError) as excinfo:
        import_start(owner=alice, filename="upload.json", content=content)
    assert excinfo.value.messages[0].startswith("Nothing was imported.")
    assert not ImportJob.objects.exists()
    assert (Memory.objects.count(), Person.objects.count()) == before


def test_unknown_schema_version_is_refused_clearly(alice, journal, bea):
    document = export_json(owner=alice)
    document["schema_version"] = 99
    with pytest.raises(ValidationError) as excinfo:
        import_start(owner=bea, filename="future.json", content=json.dumps(document).encode())
    assert "Unknown schema version 99" in excinfo.value.messages[0]
    assert not ImportJob.objects.exists()


def test_keepsake_export_with_dangling_reference_imports_nothing(alice, journal, bea):
    document = export_json(owner=alice)
    document["memories"][-1]["participants"].append({"person": "not-a-person", "role": "subject"})
    document["memories"][0]["kind"] = "gossip"
    with pytest.raises(ValidationError) as excinfo:
        import_start(owner=bea, filename="broken.json", content=json.dumps(document).encode())
    text = " ".join(excinfo.value.messages)
    assert "refers to a person that is not in the file" in text
    assert "memories[0].kind" in text
    assert not Memory.objects.filter(owner=bea).exists()
    assert not Person.objects.filter(owner=bea, is_self=False).exists()


def test_too_large_file_is_refused(alice, settings):
    settings.KEEPSAKE_IMPORT_MAX_BYTES = 1000
    content = (FIXTURES / "dayone_sample.json").read_bytes()
    assert len(content) > 1000
    with pytest.raises(ValidationError) as excinfo:
        import_start(owner=alice, filename="Journal.json", content=content)
    assert "limit" in excinfo.value.messages[0]
    assert not ImportJob.objects.exists()


def test_zip_whose_json_inflates_past_the_limit_is_refused(alice, settings):
    settings.KEEPSAKE_IMPORT_MAX_BYTES = 5000
    content = _zip({"Journal.json": b'{"entries": []}' + b" " * 50_000})
    assert len(content) < 5000
    with pytest.raises(ValidationError):
        import_start(owner=alice, filename="bomb.zip", content=content)


def test_import_items_are_recorded_once(alice):
    job = run_import(alice, filename="Journal.json", content=(FIXTURES / "dayone_sample.json").read_bytes())
    assert ImportedItem.objects.filter(job=job).count() == 5
    assert job.payload is None  # cleared when done
    assert MemoryEdge.objects.filter(owner=alice).count() == 0


def test_supersession_the_rules_refuse_is_skipped_with_reason(alice, journal, bea):
    document = export_json(owner=alice)
    for memory in document["memories"]:
        if memory["id"] == str(journal.lives_paris.pk):
            memory["sensitivity"] = "sensitive"  # no longer matches the newer memory
    job = run_import(bea, filename="edited.json", content=json.dumps(document).encode())
    older = Memory.objects.get(owner=bea, body="Carol lives in Paris.")
    assert older.superseded_by is None
    assert any("same sensitivity" in entry["reason"] for entry in job.skipped if entry["skipped"])
