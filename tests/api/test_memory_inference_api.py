"""The API infers kind and sensitivity exactly as the web form's "Work it out" does.

Before, the API defaulted to `knowledge` / `personal`, so health, money or sex-life
text posted by a script was stored `personal` while the same words typed into the
web form were `sensitive`.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from benchmarks.sensitivity import labelled_lines
from memories.models import Memory
from tests.memories.test_views import quick_add_data

MEMORIES = "/api/v1/memories/"


def _detail(memory_id: str) -> str:
    return f"{MEMORIES}{memory_id}/"


@pytest.mark.parametrize(
    "body",
    [
        "Booked my annual health checkup for Tuesday",
        "Still paying off the credit card debt",
        "Our sex life has gone quiet since the baby",
        "Leo came out as gay to his parents",
        "Fasting for Ramadan starts next week",
        "Voted Green for the first time",
        "Got laid off this morning",
    ],
)
def test_create_without_sensitivity_infers_sensitive(owner_api, body) -> None:
    response = owner_api.post(MEMORIES, {"body": body})

    assert response.status_code == 201
    assert response.json()["sensitivity"] == "sensitive"
    assert Memory.objects.get(pk=response.json()["id"]).sensitivity == "sensitive"


def test_explicit_values_from_the_caller_are_kept(owner_api) -> None:
    response = owner_api.post(
        MEMORIES, {"body": "Anna is pregnant, due in March", "kind": "knowledge", "sensitivity": "personal"}
    )

    assert (response.json()["kind"], response.json()["sensitivity"]) == ("knowledge", "personal")


def test_null_means_work_it_out_too(owner_api) -> None:
    response = owner_api.post(
        MEMORIES, {"body": "Remind me to pay the loan instalment", "kind": None, "sensitivity": None}
    )

    assert (response.json()["kind"], response.json()["sensitivity"]) == ("task", "sensitive")


def test_api_and_web_form_infer_the_same_on_labelled_lines(owner_api, world) -> None:
    # Every fifth line (all labels and topics, near misses included): two saves per
    # line through the full request stack, so the whole list would take most of a minute.
    web = Client()
    web.force_login(world.alice)
    for line in labelled_lines()[::5]:
        api_memory = owner_api.post(MEMORIES, {"body": line.text}).json()
        before = set(Memory.objects.filter(owner=world.alice).values_list("pk", flat=True))
        web.post(reverse("memory_create"), quick_add_data(body=line.text, kind="", sensitivity=""))
        [web_memory] = Memory.objects.filter(owner=world.alice).exclude(pk__in=before)
        assert (api_memory["kind"], api_memory["sensitivity"]) == (web_memory.kind, web_memory.sensitivity), (
            line.text
        )


def test_put_without_sensitivity_works_it_out_from_the_new_text(owner_api) -> None:
    created = owner_api.post(MEMORIES, {"body": "Picnic by the river", "sensitivity": "public"}).json()

    response = owner_api.put(
        _detail(created["id"]), {"body": "Bob's chemo starts Monday", "participants": []}
    )

    assert response.status_code == 200
    assert response.json()["sensitivity"] == "sensitive"


def test_patch_without_sensitivity_keeps_it_and_null_works_it_out(owner_api) -> None:
    created = owner_api.post(MEMORIES, {"body": "Picnic by the river", "sensitivity": "public"}).json()

    kept = owner_api.patch(_detail(created["id"]), {"body": "Picnic, then Bob told us about his debt"})
    assert (kept.json()["sensitivity"], kept.json()["kind"]) == ("public", created["kind"])

    inferred = owner_api.patch(_detail(created["id"]), {"sensitivity": None})
    assert inferred.json()["sensitivity"] == "sensitive"


@pytest.mark.parametrize(
    "body",
    [
        "Booked my annual health checkup for Tuesday",
        "Dad's blood pressure was high at the GP again",
        "Finished the first draft of my novel today",
        "Our wedding is planned for next year",
    ],
)
def test_api_and_web_form_agree_on_kind_sensitivity_and_lifetime(owner_api, world, body) -> None:
    api_memory = Memory.objects.get(pk=owner_api.post(MEMORIES, {"body": body}).json()["id"])
    web = Client()
    web.force_login(world.alice)
    before = set(Memory.objects.filter(owner=world.alice).values_list("pk", flat=True))
    web.post(reverse("memory_create"), quick_add_data(body=body, kind="", sensitivity=""))
    [web_memory] = Memory.objects.filter(owner=world.alice).exclude(pk__in=before)

    assert (api_memory.kind, api_memory.sensitivity, api_memory.expires_at) == (
        web_memory.kind,
        web_memory.sensitivity,
        web_memory.expires_at,
    )
    if "health" in body or "blood pressure" in body:
        assert api_memory.sensitivity == "sensitive"
    if "novel" in body:
        assert (api_memory.kind, api_memory.expires_at) == ("knowledge", None)
    if "wedding" in body:
        assert api_memory.kind == "event" and api_memory.expires_at.year == api_memory.occurred_at.year + 2
