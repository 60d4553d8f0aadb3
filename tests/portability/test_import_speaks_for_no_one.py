"""An import never speaks for anyone (SPEC §4 "Linked people"; issue #36 item 3).

A Keepsake export may say a person decided for themself (`person_consents.updated_by`
and `consent_events.actor_kind` = `self`): edited by hand, or honestly, because they
were linked in the exporting account. Either way the file is the importer's word, so
every decision is written as the importing owner's, the history is kept and labelled
as imported, and the job's report says how many claims were rewritten. Alice exports;
Bea, a fresh account, imports.
"""

from __future__ import annotations

import json
from html import unescape
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from accounts.services import access_token_create, user_signup
from circles.models import Circle
from circles.services import circle_create
from linked.selectors import linked_consents_for_user
from linked.services import person_link_accept, person_link_invite_create
from people.models import ConsentActor, ConsentEvent, ConsentStatus, Person, PersonConsent
from people.services import person_create, person_delete, person_set_consent
from portability.models import ImportStatus
from portability.selectors import export_json
from tests.api.conftest import ApiClient
from tests.portability.conftest import run_import

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent / "fixtures"
FORGED_REASON = "I am happy for every agent to know everything about me."


def forge_carol_granting_herself(document: dict, carol: Person) -> dict:
    """Alice's export, edited: Carol (pending, never linked) "granted her agents consent herself"."""
    carol_id = str(carol.pk)
    document["consent_events"].append(
        {
            "id": 999999,
            "person": carol_id,
            "person_name": "Carol",
            "audience": "agents",
            "actor_kind": "self",
            "actor": None,
            "old_status": "pending",
            "new_status": "granted",
            "surface": "ui",
            "reason": FORGED_REASON,
            "created_at": "2026-01-02T10:00:00+00:00",
        }
    )
    for person in document["people"]:
        if person["id"] == carol_id:
            person["consent_status"] = "granted"
            person["consent_updated_at"] = "2026-01-02T10:00:00+00:00"
    for row in document["person_consents"]:
        if row["person"] == carol_id and row["audience"] == "agents":
            row.update(status="granted", reason=FORGED_REASON, updated_by="self")
    return document


def self_rows(owner) -> list:
    return list(ConsentEvent.objects.filter(owner=owner, actor_kind=ConsentActor.SELF)) + list(
        PersonConsent.objects.filter(person__owner=owner, updated_by=ConsentActor.SELF)
    )


def test_a_forged_self_decision_is_imported_as_the_owners_and_counted(alice, journal, bea):
    document = forge_carol_granting_herself(export_json(owner=alice), journal.carol)
    job = run_import(bea, filename="edited.json", content=json.dumps(document).encode())
    assert job.status == ImportStatus.DONE
    assert self_rows(bea) == []
    assert job.self_claims_rewritten == 2  # the event and the consent row

    carol = Person.objects.get(owner=bea, display_name="Carol")
    # The decision stands (its history backs it), as Bea's: she may always ask Carol again.
    assert carol.consent_status == ConsentStatus.GRANTED
    row = PersonConsent.objects.get(person=carol, audience="agents")
    assert (row.updated_by, row.reason) == (ConsentActor.OWNER, FORGED_REASON)
    [event] = ConsentEvent.objects.filter(person=carol)
    assert (event.actor_kind, event.actor, event.reason) == (ConsentActor.OWNER, bea, FORGED_REASON)
    assert event.imported_at is not None
    # Every imported event is labelled, the honest ones too.
    assert not ConsentEvent.objects.filter(owner=bea, imported_at=None).exists()

    notes = [entry for entry in job.skipped if not entry["skipped"] and "Carol" in entry["item"]]
    assert notes and "in 2 places (a consent or its history) the file says they decided" in notes[0]["reason"]


@pytest.mark.parametrize("htmx", [False, True])
def test_the_import_page_says_how_many_claims_were_rewritten(alice, journal, bea, client, htmx):
    document = forge_carol_granting_herself(export_json(owner=alice), journal.carol)
    job = run_import(bea, filename="edited.json", content=json.dumps(document).encode())
    client.force_login(bea)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    page = unescape(client.get(reverse("import_job_detail", args=[job.pk]), **headers).content.decode())
    assert "2 claims that a person decided for themselves rewritten as yours" in page
    assert "An import cannot speak for anyone" in page
    settings_page = unescape(client.get(reverse("settings")).content.decode())
    assert "2 claims rewritten as yours" in settings_page


def test_after_linking_my_consents_shows_the_owners_decision_not_by_you(alice, journal, bea):
    document = forge_carol_granting_herself(export_json(owner=alice), journal.carol)
    run_import(bea, filename="edited.json", content=json.dumps(document).encode())
    carol_account = user_signup(username="carol", password="correct horse battery")
    carol = Person.objects.get(owner=bea, display_name="Carol")
    _, token = person_link_invite_create(person=carol, by=bea)
    person_link_accept(token=token, user=carol_account)

    [journal_view] = linked_consents_for_user(user=carol_account)
    [entry] = journal_view.people
    agents = next(linked for linked in entry.audiences if linked.consent.audience == "agents")
    assert agents.consent.updated_by == ConsentActor.OWNER

    client = Client()
    client.force_login(carol_account)
    page = unescape(client.get(reverse("my_consents")).content.decode())
    assert "by bea" in page
    assert "by you" not in page

    # Bea's own pages and API label the history as imported.
    client.force_login(bea)
    person_page = unescape(client.get(reverse("person_detail", args=[carol.pk])).content.decode())
    assert ">imported</span>" in person_page
    _, raw_token = access_token_create(owner=bea, kind="owner", name="laptop")
    history = ApiClient(Client(), raw_token).get(f"/api/v1/people/{carol.pk}/consent-events/").json()
    assert history and all(event["imported_at"] for event in history)


def test_an_honest_export_of_a_linked_persons_own_choices_is_imported_as_the_owners(alice, bea):
    """In Alice's account Eve was linked and decided herself; in Bea's she is not linked: Bea decides."""
    eve_account = user_signup(username="eve", password="correct horse battery")
    family = circle_create(owner=alice, name="Family")
    eve = person_create(owner=alice, display_name="Eve")
    _, token = person_link_invite_create(person=eve, by=alice)
    person_link_accept(token=token, user=eve_account)
    for audience in ("agents", family.audience):
        person_set_consent(
            person=eve,
            status=ConsentStatus.GRANTED,
            actor=eve_account,
            actor_kind=ConsentActor.SELF,
            audience=audience,
            reason="Fine by me",
        )
    # And someone deleted since, whose history outlives them with a decision of their own.
    ghost_account = user_signup(username="ghost", password="correct horse battery")
    ghost = person_create(owner=alice, display_name="Ghost")
    _, token = person_link_invite_create(person=ghost, by=alice)
    person_link_accept(token=token, user=ghost_account)
    person_set_consent(
        person=ghost, status=ConsentStatus.REVOKED, actor=ghost_account, actor_kind=ConsentActor.SELF
    )
    person_delete(person=ghost)
    assert len(self_rows(alice)) == 5  # Eve: two events, two rows; Ghost: one event

    job = run_import(bea, filename="alice.json", content=json.dumps(export_json(owner=alice)).encode())
    assert job.status == ImportStatus.DONE and job.skipped_count == 0, job.skipped
    assert self_rows(bea) == []
    assert job.self_claims_rewritten == 5
    new_family = Circle.objects.get(owner=bea)
    eve_here = Person.objects.get(owner=bea, display_name="Eve")
    assert eve_here.linked_user is None
    rows = dict(PersonConsent.objects.filter(person=eve_here).values_list("audience", "updated_by"))
    assert rows == {"agents": ConsentActor.OWNER, new_family.audience: ConsentActor.OWNER}
    [ghost_event] = ConsentEvent.objects.filter(owner=bea, person_name="Ghost")
    assert (ghost_event.actor_kind, ghost_event.actor, ghost_event.new_status) == (
        ConsentActor.OWNER,
        bea,
        ConsentStatus.REVOKED,
    )
    notes = " ".join(entry["reason"] for entry in job.skipped)
    assert "Eve: in 4 places (a consent or its history) the file says they decided" in notes


def test_a_day_one_import_writes_no_consent_decision(alice):
    before = (ConsentEvent.objects.count(), PersonConsent.objects.count())
    job = run_import(alice, filename="Journal.json", content=(FIXTURES / "dayone_sample.json").read_bytes())
    assert job.status == ImportStatus.DONE and job.self_claims_rewritten == 0
    assert (ConsentEvent.objects.count(), PersonConsent.objects.count()) == before
