"""Export and import of sharing (SPEC §4): circles, memberships, shares, consent per
audience and the consent history with its audiences.

Alice owns "Family" (Bob is a member) and is a member of Mallory's "Work". Bea is
a fresh account that imports Alice's export.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
import yaml
from django.core.exceptions import ValidationError

from accounts.services import user_signup
from circles.models import Circle, CircleMembership, MembershipRole, MemoryShare
from circles.services import circle_create, circle_update, memory_share
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentEvent, Person, PersonConsent
from people.services import person_create, person_delete, person_set_consent
from portability.models import ImportStatus
from portability.selectors import export_json, export_markdown_zip
from portability.services import import_start
from tests.portability.conftest import run_import


@dataclass
class Sharing:
    family: Circle
    work: Circle
    carol: Person
    dan: Person
    with_carol: Memory
    with_dan: Memory
    at_work: Memory
    bobs: Memory


@pytest.fixture
def bob(db):
    return user_signup(username="bob", password="correct horse battery")


@pytest.fixture
def sharing(alice, bob, mallory) -> Sharing:
    family = circle_create(owner=alice, name="Family", description="Grandma's stories")
    circle_update(circle=family, by=alice, agents_may_read=True)
    CircleMembership.objects.create(circle=family, user=bob, role=MembershipRole.MEMBER)
    work = circle_create(owner=mallory, name="Work")
    CircleMembership.objects.create(circle=work, user=alice, role=MembershipRole.MEMBER)

    carol = person_create(owner=alice, display_name="Carol")
    dan = person_create(owner=alice, display_name="Dan")
    person_set_consent(person=carol, status="granted", actor=alice, reason="She said yes")
    person_set_consent(
        person=carol, status="granted", actor=alice, audience=family.audience, reason="Family ok"
    )
    person_set_consent(person=carol, status="revoked", actor=alice, audience=work.audience, reason="Not work")
    person_set_consent(person=dan, status="granted", actor=alice, audience=family.audience)
    person_set_consent(person=dan, status="granted", actor=alice, audience=work.audience)

    with_carol = memory_create(
        owner=alice,
        title="Picnic",
        body="Carol brought the cake.",
        occurred_at=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
        sensitivity="public",
        participants=[ParticipantSpec(carol, "subject")],
    )
    with_dan = memory_create(
        owner=alice,
        title="Dan's news",
        body="Dan moved to Lyon.",
        occurred_at=datetime(2024, 6, 1, 12, 0, tzinfo=UTC),
        sensitivity="public",
        participants=[ParticipantSpec(dan, "subject")],
    )
    at_work = memory_create(owner=alice, body="The quarterly review went well.", sensitivity="public")
    memory_share(memory=with_carol, circle=family, by=alice)
    memory_share(memory=with_dan, circle=family, by=alice)
    memory_share(memory=with_dan, circle=work, by=alice)
    memory_share(memory=at_work, circle=work, by=alice)
    # Dan changes his mind after the share: the share stays, the gate hides it.
    person_set_consent(person=dan, status="revoked", actor=alice, audience=family.audience, reason="Private")
    bobs = memory_create(owner=bob, body="Bob's own note.", sensitivity="public")
    memory_share(memory=bobs, circle=family, by=bob)
    return Sharing(family, work, carol, dan, with_carol, with_dan, at_work, bobs)


def _import(owner, document: dict):
    return run_import(owner, filename="alice.json", content=json.dumps(document).encode())


# --- export ------------------------------------------------------------------------------


def test_export_has_the_circles_alice_owns_with_members_by_username(alice, sharing):
    document = export_json(owner=alice)
    [family] = document["circles"]
    assert family["id"] == str(sharing.family.pk)
    assert (family["name"], family["description"], family["agents_may_read"]) == (
        "Family",
        "Grandma's stories",
        True,
    )
    assert "owner" not in family
    assert [(member["user"], member["role"]) for member in family["members"]] == [
        ("alice", "owner"),
        ("bob", "member"),
    ]
    assert "Work" not in json.dumps(document["circles"])  # Mallory's circle is not Alice's to export


def test_export_has_alices_shares_naming_each_circle(alice, sharing):
    shares = {(row["memory"], row["circle_name"]): row for row in export_json(owner=alice)["shares"]}
    assert set(shares) == {
        (str(sharing.with_carol.pk), "Family"),
        (str(sharing.with_dan.pk), "Family"),
        (str(sharing.with_dan.pk), "Work"),
        (str(sharing.at_work.pk), "Work"),
    }
    work = shares[(str(sharing.at_work.pk), "Work")]
    assert (work["circle"], work["circle_owner"], work["shared_by"]) == (
        str(sharing.work.pk),
        "mallory",
        "alice",
    )
    assert str(sharing.bobs.pk) not in json.dumps(export_json(owner=alice))  # Bob's share is Bob's


def test_export_has_every_consent_per_audience(alice, sharing):
    consents = {
        (row["person"], row["audience"]): row
        for row in export_json(owner=alice)["person_consents"]
        if row["person"] == str(sharing.carol.pk)
    }
    assert {audience: row["status"] for (_, audience), row in consents.items()} == {
        "agents": "granted",
        sharing.family.audience: "granted",
        sharing.work.audience: "revoked",
    }
    family = consents[(str(sharing.carol.pk), sharing.family.audience)]
    assert (family["reason"], family["updated_by"]) == ("Family ok", "owner")
    assert family["updated_at"]


def test_export_history_has_audience_name_and_who_decided_and_outlives_the_person(alice, sharing):
    ghost = person_create(owner=alice, display_name="Ghost")
    person_set_consent(person=ghost, status="granted", actor=alice, audience=sharing.family.audience)
    person_delete(person=ghost)
    events = export_json(owner=alice)["consent_events"]
    carol = [
        (e["audience"], e["new_status"], e["person_name"], e["actor_kind"])
        for e in events
        if e["person"] == str(sharing.carol.pk)
    ]
    assert carol == [
        ("agents", "granted", "Carol", "owner"),
        (sharing.family.audience, "granted", "Carol", "owner"),
        (sharing.work.audience, "revoked", "Carol", "owner"),
    ]
    [ghost_event] = [e for e in events if e["person_name"] == "Ghost"]
    assert ghost_event["person"] is None and ghost_event["audience"] == sharing.family.audience


def test_export_leaves_out_gate_hints_and_circle_chats_and_survives_vectors(alice, sharing):
    vector = [1.0] + [0.0] * 383
    Memory.objects.filter(pk=sharing.with_carol.pk).update(
        embedding=vector
    )  # triggers copy it (half precision)
    document = export_json(owner=alice)
    text = json.dumps(document)  # no vector of any kind reaches the document
    for label in (
        "memories.memorygate",
        "circles.circleconversation",
        "circles.memoryshare",
        "people.personconsent",
    ):
        assert label not in document["records"]
    assert "blocked_count" not in text


def test_markdown_names_where_each_memory_is_shared_and_consent_per_audience(alice, sharing):
    archive = zipfile.ZipFile(io.BytesIO(export_markdown_zip(owner=alice)))
    name = next(n for n in archive.namelist() if sharing.with_dan.pk.hex[:8] in n)
    front = yaml.safe_load(archive.read(name).decode().split("---\n")[1])
    assert front["shared_into"] == ["Family", "Work"]
    people = archive.read("keepsake-people.md").decode()
    assert "- My agents: granted — She said yes (you decided)" in people
    assert "- the circle “Family”: granted — Family ok (you decided)" in people
    assert "- the circle “Work”: revoked — Not work (you decided)" in people
    assert "the circle “Family”: granted → revoked (you decided, Web): Private" in people
    circles = archive.read("keepsake-circles.md").decode()
    assert "## Family" in circles and "Members: alice (owner), bob (member)" in circles
    picnic = next(n for n in archive.namelist() if sharing.with_carol.pk.hex[:8] in n)
    assert f"- 2024-05-01 Picnic ({picnic})" in circles
    assert "### Work (owned by mallory)" in circles
    assert "Bob's own note" not in circles


# --- import --------------------------------------------------------------------------------


def test_import_recreates_owned_circles_with_only_the_importer(alice, sharing, bea):
    job = _import(bea, export_json(owner=alice))
    assert job.status == ImportStatus.DONE
    [family] = Circle.objects.filter(owner=bea)
    assert family.pk != sharing.family.pk
    assert (family.name, family.description, family.agents_may_read) == ("Family", "Grandma's stories", True)
    assert list(CircleMembership.objects.filter(circle=family).values_list("user__username", "role")) == [
        ("bea", "owner")
    ]
    assert not Circle.objects.filter(owner=bea, name="Work").exists()
    notes = {entry["item"]: entry["reason"] for entry in job.skipped if not entry["skipped"]}
    assert "bob" in notes["Circle “Family”"] and "invite them again" in notes["Circle “Family”"]


def test_import_restores_consent_for_recreated_circles_only_and_remaps_history(alice, sharing, bea):
    job = _import(bea, export_json(owner=alice))
    family = Circle.objects.get(owner=bea)
    carol = Person.objects.get(owner=bea, display_name="Carol")
    dan = Person.objects.get(owner=bea, display_name="Dan")
    assert dict(PersonConsent.objects.filter(person=carol).values_list("audience", "status")) == {
        "agents": "granted",
        family.audience: "granted",
    }
    row = PersonConsent.objects.get(person=carol, audience=family.audience)
    assert (row.reason, row.updated_by) == ("Family ok", "owner")
    agents = PersonConsent.objects.get(person=carol, audience="agents")
    assert agents.reason == "She said yes"
    assert PersonConsent.objects.get(person=dan, audience=family.audience).status == "revoked"
    # Nothing for the old circles' audiences (Work is Mallory's, Family is Alice's).
    assert not PersonConsent.objects.filter(person__owner=bea, audience=sharing.work.audience).exists()
    assert not PersonConsent.objects.filter(person__owner=bea, audience=sharing.family.audience).exists()
    history = list(
        ConsentEvent.objects.filter(person=carol)
        .order_by("created_at", "id")
        .values_list("audience", "new_status")
    )
    assert history == [
        ("agents", "granted"),
        (family.audience, "granted"),
        (sharing.work.audience, "revoked"),
    ]
    notes = " ".join(entry["reason"] for entry in job.skipped if not entry["skipped"])
    assert "Dan: their consent for 1 circle that you did not own is not restored" in notes


def test_import_restores_shares_into_recreated_circles_through_the_consent_check(alice, sharing, bea):
    job = _import(bea, export_json(owner=alice))
    family = Circle.objects.get(owner=bea)
    shared = set(MemoryShare.objects.filter(memory__owner=bea).values_list("memory__title", "circle__name"))
    assert shared == {("Picnic", "Family")}
    skipped = {entry["item"]: entry["reason"] for entry in job.skipped if entry["skipped"]}
    dan_family = next(reason for item, reason in skipped.items() if "into “Family”" in item)
    assert "Dan (revoked)" in dan_family
    work = [reason for item, reason in skipped.items() if "into “Work”" in item]
    assert len(work) == 2 and all("someone else's circle" in reason for reason in work)
    assert job.skipped_count == 3
    assert family.shares.count() == 1


def test_circle_consent_the_history_does_not_back_is_not_restored(alice, sharing, bea):
    document = export_json(owner=alice)
    family_audience = sharing.family.audience
    document["consent_events"] = [
        e
        for e in document["consent_events"]
        if not (e["person"] == str(sharing.carol.pk) and e["audience"] == family_audience)
    ]
    job = _import(bea, document)
    family = Circle.objects.get(owner=bea)
    carol = Person.objects.get(owner=bea, display_name="Carol")
    assert not PersonConsent.objects.filter(person=carol, audience=family.audience).exists()  # pending
    assert carol.consent_status == "granted"  # the agents' consent has its history
    notes = [entry for entry in job.skipped if not entry["skipped"] and entry["item"] == "Person “Carol”"]
    assert "pending for the circle “Family”" in notes[0]["reason"]
    assert not MemoryShare.objects.filter(memory__owner=bea).exists()  # Picnic is refused now


def test_broken_circle_history_resets_to_pending_with_an_event(alice, sharing, bea):
    document = export_json(owner=alice)
    for event in document["consent_events"]:
        if event["person"] == str(sharing.dan.pk) and event["audience"] == sharing.family.audience:
            event["old_status"] = "revoked"  # no longer a chain from pending
    _import(bea, document)
    family = Circle.objects.get(owner=bea)
    dan = Person.objects.get(owner=bea, display_name="Dan")
    assert not PersonConsent.objects.filter(person=dan, audience=family.audience).exists()
    last = (
        ConsentEvent.objects.filter(person=dan, audience=family.audience)
        .order_by("-created_at", "-id")
        .first()
    )
    assert (last.old_status, last.new_status) == ("revoked", "pending")


def test_history_of_deleted_people_is_restored_under_their_name(alice, sharing, bea):
    ghost = person_create(owner=alice, display_name="Ghost")
    person_set_consent(person=ghost, status="granted", actor=alice, reason="long ago")
    person_delete(person=ghost)
    job = _import(bea, export_json(owner=alice))
    assert job.skipped_count == 3  # the three shares above, nothing else
    [event] = ConsentEvent.objects.filter(owner=bea, person_name="Ghost")
    assert (event.person_id, event.audience, event.new_status, event.reason) == (
        None,
        "agents",
        "granted",
        "long ago",
    )


def test_round_trip_keeps_sharing_content(alice, sharing, bea):
    original = export_json(owner=alice)
    _import(bea, original)
    again = export_json(owner=bea)

    def sharing_content(document: dict) -> dict:
        person = {p["id"]: p["display_name"] for p in document["people"]}
        memory = {m["id"]: m["title"] or m["body"] for m in document["memories"]}
        circle = {c["id"]: c["name"] for c in document["circles"]}

        def audience(value: str) -> str:
            return circle.get(value.removeprefix("circle:"), "elsewhere") if value != "agents" else value

        username = document["account"]["username"]
        return {
            "circles": sorted(
                (c["name"], c["description"], c["agents_may_read"], c["agent_role"], c["agent_instructions"])
                for c in document["circles"]
            ),
            "owners": sorted(
                (c["name"], m["role"])
                for c in document["circles"]
                for m in c["members"]
                if m["user"] == username
            ),
            "shares": sorted(
                (memory[s["memory"]], s["circle_name"]) for s in document["shares"] if s["circle"] in circle
            ),
            "consents": sorted(
                (person[c["person"]], audience(c["audience"]), c["status"], c["reason"], c["updated_by"])
                for c in document["person_consents"]
                if c["audience"] == "agents" or c["audience"].removeprefix("circle:") in circle
            ),
            "history": sorted(
                (
                    e["person_name"],
                    audience(e["audience"]),
                    e["old_status"],
                    e["new_status"],
                    e["actor_kind"],
                    e["created_at"],
                )
                for e in document["consent_events"]
            ),
        }

    expected = sharing_content(original)
    # What is not restored, by design: Dan's share into Family (he revoked it since).
    expected["shares"].remove(("Dan's news", "Family"))
    assert sharing_content(again) == expected
    assert all(expected.values())


def test_an_export_from_before_circles_still_imports(alice, sharing, bea):
    document = export_json(owner=alice)
    for key in ("circles", "shares", "person_consents"):
        del document[key]
    document["consent_events"] = [
        {k: v for k, v in e.items() if k not in ("audience", "actor_kind", "person_name")}
        for e in document["consent_events"]
        if e["audience"] == "agents"
    ]
    job = _import(bea, document)
    assert job.status == ImportStatus.DONE and job.skipped_count == 0, job.skipped
    assert Person.objects.get(owner=bea, display_name="Carol").consent_status == "granted"
    assert not Circle.objects.filter(owner=bea).exists()


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["person_consents"][0].update(audience="circle:nope"), "person_consents[0].audience"),
        (lambda d: d["person_consents"][0].update(person="not-a-person"), "refers to a person"),
        (lambda d: d["shares"][0].update(memory="not-a-memory"), "refers to a memory"),
        (lambda d: d["consent_events"][0].update(actor_kind="robot"), "consent_events[0].actor_kind"),
        (lambda d: d["circles"][0].update(agents_may_read="yes"), "circles[0].agents_may_read"),
        (lambda d: d["circles"].append(dict(d["circles"][0])), "appears twice"),
    ],
)
def test_malformed_sharing_sections_import_nothing(alice, sharing, bea, edit, message):
    document = export_json(owner=alice)
    edit(document)
    with pytest.raises(ValidationError) as excinfo:
        import_start(owner=bea, filename="edited.json", content=json.dumps(document).encode())
    assert message in " ".join(excinfo.value.messages)
    assert not Circle.objects.filter(owner=bea).exists()
