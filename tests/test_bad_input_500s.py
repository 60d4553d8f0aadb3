"""Inputs that used to answer 500: each is now a clear 4xx (or form error) and changes nothing.

From the hardening issue "Every bad input is a clear 4xx and changes nothing".
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from accounts.models import TokenKind
from accounts.services import access_token_create
from memories.models import Memory
from memories.services import memory_create
from people.models import ConsentEvent, Person
from portability.models import ImportJob

TOO_FAR = "That date is too far in the future"


@pytest.fixture
def owner_token(alice) -> str:
    return access_token_create(owner=alice, kind=TokenKind.OWNER, name="scripts")[1]


@pytest.fixture
def agent_token(alice) -> str:
    from agents.models import Agent

    agent = Agent.objects.filter(owner=alice).first()
    return access_token_create(owner=alice, kind=TokenKind.AGENT, agent=agent)[1]


@pytest.fixture
def memory(alice) -> Memory:
    return memory_create(owner=alice, body="Walked by the river.", kind="knowledge")


def _rows() -> tuple[int, ...]:
    return (
        Memory.objects.count(),
        Person.objects.count(),
        ConsentEvent.objects.count(),
        ImportJob.objects.count(),
    )


def _snapshot(memory: Memory) -> tuple:
    memory.refresh_from_db()
    return (memory.body, memory.occurred_at, memory.kind, memory.expires_at)


def _api(token: str) -> dict:
    return {"headers": {"Authorization": f"Bearer {token}"}, "content_type": "application/json"}


# --- year 9999 with a short-lived kind ----------------------------------------------


def test_api_create_with_year_9999_and_short_lived_kind_is_400(alice, owner_token) -> None:
    before = _rows()
    response = Client().post(
        "/api/v1/memories/",
        json.dumps({"body": "Far away", "kind": "event", "occurred_at": "9999-12-31T23:00:00Z"}),
        **_api(owner_token),
    )
    assert response.status_code == 400
    assert TOO_FAR in response.json()["occurred_at"][0]
    assert _rows() == before


def test_api_edit_with_year_9999_and_short_lived_kind_is_400(alice, owner_token, memory) -> None:
    before, snapshot = _rows(), _snapshot(memory)
    response = Client().put(
        f"/api/v1/memories/{memory.pk}/",
        json.dumps(
            {"body": "Far away", "kind": "task", "occurred_at": "9999-12-31T23:00:00Z", "participants": []}
        ),
        **_api(owner_token),
    )
    assert response.status_code == 400
    assert TOO_FAR in response.json()["occurred_at"][0]
    assert (_rows(), _snapshot(memory)) == (before, snapshot)


def test_web_create_with_year_9999_and_short_lived_kind_is_a_form_error(alice_client) -> None:
    before = _rows()
    response = alice_client.post(
        "/memories/new/",
        {
            "body": "Far away",
            "kind": "event",
            "occurred_at": "9999-12-31T23:00",
            "people-TOTAL_FORMS": "0",
            "people-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert TOO_FAR in response.content.decode()
    assert _rows() == before


def test_web_edit_with_year_9999_and_short_lived_kind_is_a_form_error(alice_client, memory) -> None:
    before, snapshot = _rows(), _snapshot(memory)
    response = alice_client.post(
        f"/memories/{memory.pk}/edit/",
        {
            "body": "Far away",
            "kind": "task",
            "occurred_at": "9999-12-31",
            "people-TOTAL_FORMS": "0",
            "people-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code in (200, 400)
    assert TOO_FAR in response.content.decode()
    assert (_rows(), _snapshot(memory)) == (before, snapshot)


# --- offsets past bigint -------------------------------------------------------------


@pytest.mark.parametrize("which", ["owner", "agent"])
def test_memory_list_offset_past_bigint_is_400(alice, owner_token, agent_token, which) -> None:
    token = owner_token if which == "owner" else agent_token
    response = Client().get("/api/v1/memories/?offset=9223372036854775808", **_api(token))
    assert response.status_code == 400
    assert "offset" in response.json()


def test_circle_memory_list_offset_past_bigint_is_400(alice, owner_token) -> None:
    from circles.services import circle_create

    circle = circle_create(owner=alice, name="Family")
    response = Client().get(
        f"/api/v1/circles/{circle.pk}/memories/?offset=9223372036854775808", **_api(owner_token)
    )
    assert response.status_code == 400
    assert "offset" in response.json()


@pytest.mark.parametrize("url", ["/api/v1/people/", "/api/v1/circles/"])
def test_unpaged_lists_ignore_a_huge_offset(alice, owner_token, url) -> None:
    # People, consent events and circles are not paged: offset is not a parameter there.
    response = Client().get(
        f"{url}?offset=9223372036854775808&limit=9223372036854775808", **_api(owner_token)
    )
    assert response.status_code == 200


# --- deeply nested JSON ----------------------------------------------------------------


@pytest.mark.parametrize("url", ["/api/v1/memories/", "/api/v1/tokens/", "agent-chat"])
def test_deeply_nested_json_is_400(alice, owner_token, url) -> None:
    if url == "agent-chat":
        from agents.models import Agent

        url = f"/api/v1/agents/{Agent.objects.filter(owner=alice).first().pk}/chat/"
    before = _rows()
    body = '{"body": ' + "[" * 100_000 + "]" * 100_000 + "}"
    if url == "/api/v1/tokens/":
        # Tokens are managed from a signed-in session only.
        session = Client()
        session.force_login(alice)
        response = session.post(url, body, content_type="application/json")
    else:
        response = Client().post(url, body, **_api(owner_token))
    assert response.status_code == 400
    assert "nested" in response.json()["detail"]
    assert _rows() == before


# --- NUL in web searches ------------------------------------------------------------------


def test_nul_in_web_search_is_dropped_at_the_edge(alice_client, memory) -> None:
    # config/input_edge.py removes control characters from every query string: the rest is searched.
    response = alice_client.get("/search/", {"q": "river\x00"})
    assert response.status_code == 200
    assert str(memory.pk) in response.content.decode()


def test_nul_in_replaces_picker_search_is_treated_as_absent(alice_client, memory) -> None:
    # The picker offers only memories older than the one being edited.
    older = memory_create(
        owner=memory.owner,
        body="An older walk by the river.",
        kind="knowledge",
        occurred_at=memory.occurred_at - timedelta(days=1),
    )
    response = alice_client.get(f"/memories/{memory.pk}/replaces/", {"q": "\x00river"})
    assert response.status_code == 200
    assert str(older.pk) in response.content.decode()


# --- oversized web memory body -----------------------------------------------------------------


def test_web_memory_body_over_the_api_limit_is_a_form_error(alice_client) -> None:
    before = _rows()
    response = alice_client.post(
        "/memories/new/",
        {"body": "x" * 2_000_000, "people-TOTAL_FORMS": "0", "people-INITIAL_FORMS": "0"},
    )
    assert response.status_code == 200
    assert "at most 50000 characters" in response.content.decode()
    assert _rows() == before


def test_web_person_notes_over_the_api_limit_are_a_form_error(alice_client) -> None:
    before = _rows()
    response = alice_client.post(
        "/people/new/", {"display_name": "Zed", "kind": "human", "notes": "n" * 10_001}
    )
    assert "at most 10000 characters" in response.content.decode()
    assert _rows() == before


# --- Day One imports ------------------------------------------------------------------------


def _entry(index: int, **overrides) -> dict:
    return {
        "uuid": f"{index:032X}",
        "creationDate": "2020-01-01T10:00:00Z",
        "text": f"Entry number {index}",
        **overrides,
    }


def _upload(client: Client, document: dict):
    raw = json.dumps(document).encode()
    return client.post(
        "/settings/import/", {"file": SimpleUploadedFile("Journal.json", raw, "application/json")}
    )


@pytest.mark.parametrize(
    ("text", "reason"), [("Hello\u0000world", "NUL"), ("Hello\ud800world", "unpaired surrogate")]
)
def test_dayone_entry_with_unstorable_text_imports_nothing_and_names_it(alice_client, text, reason) -> None:
    before = _rows()
    document = {"entries": [_entry(0), _entry(1, text=text), _entry(2)]}
    response = _upload(alice_client, document)
    page = response.content.decode()
    assert response.status_code == 400
    assert "Nothing was imported" in page
    assert "entries[1].text" in page and reason in page
    assert _rows() == before


def test_dayone_file_with_one_entry_in_year_9999_imports_none_of_121(alice_client) -> None:
    before = _rows()
    entries = [_entry(index) for index in range(120)]
    entries.insert(57, _entry(999, creationDate="9999-12-31T00:00:00Z"))
    response = _upload(alice_client, {"entries": entries})
    page = response.content.decode()
    assert response.status_code == 400
    assert "entries[57].creationDate" in page and TOO_FAR in page
    assert _rows() == before


# --- strict string types ------------------------------------------------------------------------


@pytest.mark.parametrize("raw_body", ['{"body": 12345}', '{"body": 1e999}', '{"body": true}'])
def test_api_memory_body_must_be_a_string(alice, owner_token, raw_body) -> None:
    before = _rows()
    response = Client().post("/api/v1/memories/", raw_body, **_api(owner_token))
    assert response.status_code == 400
    assert "Must be a string" in response.json()["body"][0]
    assert _rows() == before


def test_api_person_notes_must_be_a_string(alice, owner_token) -> None:
    before = _rows()
    response = Client().post("/api/v1/people/", '{"display_name": "Zed", "notes": 7}', **_api(owner_token))
    assert response.status_code == 400
    assert "Must be a string" in response.json()["notes"][0]
    assert _rows() == before


# --- oversized bodies and CSRF on API paths -------------------------------------------------------


def test_oversized_api_body_answers_json(alice, owner_token) -> None:
    before = _rows()
    response = Client().post("/api/v1/memories/", json.dumps({"body": "x" * 3_000_000}), **_api(owner_token))
    assert response.status_code == 413
    assert "too large" in response.json()["detail"]
    assert response["Content-Type"].startswith("application/json")
    assert response.json()
    assert _rows() == before


def test_oversized_mcp_body_answers_json(alice, agent_token) -> None:
    payload = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": "x" * 3_000_000}}
    response = Client().post(
        "/mcp/",
        json.dumps(payload),
        content_type="application/json",
        headers={"Authorization": f"Bearer {agent_token}", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 413
    assert response["Content-Type"].startswith("application/json")
    assert "too large" in json.dumps(response.json())


def test_delete_of_a_malformed_memory_id_with_a_token_is_json_404(alice, owner_token, memory) -> None:
    before = _rows()
    response = Client(enforce_csrf_checks=True).delete("/api/v1/memories/-1/", **_api(owner_token))
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}
    assert _rows() == before


# --- forged formset counts -------------------------------------------------------------------------


@pytest.mark.parametrize("total", ["-5", "99999999"])
def test_forged_people_total_forms_is_a_form_error(alice_client, total) -> None:
    person = Person.objects.filter(owner__username="alice").first()
    before = _rows()
    response = alice_client.post(
        "/memories/new/",
        {
            "body": "Lunch together",
            "people-TOTAL_FORMS": total,
            "people-INITIAL_FORMS": "0",
            "people-0-person": str(person.pk),
            "people-0-role": "subject",
        },
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "damaged" in page or "at most 20" in page
    assert _rows() == before


# --- long passwords -----------------------------------------------------------------------------------


def test_signup_with_100000_character_password_is_refused(db, client) -> None:
    before = _rows()
    password = "p4ss-" * 20_000
    response = client.post(
        "/accounts/signup/", {"username": "zoe", "password1": password, "password2": password}
    )
    assert response.status_code in (200, 400)
    assert "too long" in response.content.decode()
    assert _rows() == before


def test_password_change_to_100000_characters_is_refused(alice_client, alice) -> None:
    password = "p4ss-" * 20_000
    response = alice_client.post(
        "/accounts/password/",
        {"old_password": "correct horse battery", "new_password1": password, "new_password2": password},
    )
    assert response.status_code in (200, 400)
    assert "too long" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("correct horse battery")
