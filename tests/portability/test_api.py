from __future__ import annotations

import io
import json
import zipfile

import pytest

from accounts.services import access_token_create

URL = "/api/v1/export/"


def _bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def test_owner_token_exports_everything(client, alice, journal):
    _token, raw = access_token_create(owner=alice, kind="owner", name="cli")
    response = client.get(URL, **_bearer(raw))
    assert response.status_code == 200
    document = response.json()
    assert document["schema_version"] == 1
    assert {m["id"] for m in document["memories"]} == {
        str(m.pk) for m in (journal.picnic, journal.lives_paris, journal.lives_berlin, journal.solo)
    }
    # maxsplit: the secret itself may contain "_" (token_urlsafe).
    assert raw.split("_", 2)[2] not in json.dumps(document)  # the token's secret never appears


def test_session_exports_too(alice_client, journal):
    response = alice_client.get(URL)
    assert response.status_code == 200
    assert response.json()["account"]["username"] == "alice"


def test_markdown_archive_through_the_api(alice_client, journal):
    response = alice_client.get(URL, {"archive": "markdown"})
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(response.content)).namelist()
    assert len([name for name in names if name.startswith("keepsake-memories/")]) == 4


def test_unknown_archive_is_a_400(alice_client):
    response = alice_client.get(URL, {"archive": "pdf"})
    assert response.status_code == 400
    assert "archive" in response.json()


def test_agent_token_is_refused(client, alice, journal):
    _token, raw = access_token_create(owner=alice, kind="agent", agent=journal.agent, name="bot")
    response = client.get(URL, **_bearer(raw))
    assert response.status_code == 403
    assert "Picnic" not in response.content.decode()


def test_anonymous_is_refused(client, journal):
    response = client.get(URL)
    assert response.status_code == 401
    assert "Picnic" not in response.content.decode()


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_export_is_read_only(alice_client, method):
    assert getattr(alice_client, method)(URL).status_code == 405


def test_mallorys_token_exports_only_mallorys_journal(client, mallory, journal):
    _token, raw = access_token_create(owner=mallory, kind="owner")
    document = client.get(URL, **_bearer(raw)).json()
    assert document["account"]["username"] == "mallory"
    assert document["memories"] == []
    assert "Picnic" not in json.dumps(document)
