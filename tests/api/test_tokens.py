from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from django.utils import timezone

from accounts.models import AccessToken, TokenKind
from accounts.services import access_token_authenticate, access_token_create
from agents.models import Agent
from tests.api.conftest import ApiClient


def test_session_creates_token_whose_secret_is_shown_once_and_stored_hashed(session_api, world) -> None:
    response = session_api.post("/api/v1/tokens/", {"kind": "agent", "agent": str(world.caregiver.pk)})

    assert response.status_code == 201
    body = response.json()
    raw = body["token"]
    assert raw.startswith(f"ks_{body['prefix']}_")
    token = AccessToken.objects.get(pk=body["id"])
    assert token.kind == TokenKind.AGENT and token.agent == world.caregiver
    assert token.secret_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw.split("_", 2)[2] not in token.secret_hash
    listed = session_api.get("/api/v1/tokens/").json()
    assert body["id"] in [t["id"] for t in listed]
    assert all("token" not in t for t in listed)
    assert raw not in str(listed)
    # The new token works straight away.
    assert ApiClient(Client(), raw).get("/api/v1/agents/").status_code == 200


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"kind": "agent"}, "agent"),
        ({"kind": "owner", "agent": "AGENT"}, "agent"),
        ({"kind": "root"}, "kind"),
        ({}, "kind"),
        ({"kind": "agent", "agent": "not-a-uuid"}, "agent"),
        ({"kind": "owner", "name": "x" * 101}, "name"),
    ],
)
def test_invalid_token_request_is_400_with_field_error_and_creates_nothing(
    session_api, world, payload, field
) -> None:
    payload = {k: (str(world.caregiver.pk) if v == "AGENT" else v) for k, v in payload.items()}
    before = AccessToken.objects.count()

    response = session_api.post("/api/v1/tokens/", payload)

    assert response.status_code == 400
    assert field in response.json()
    assert AccessToken.objects.count() == before


def test_agent_of_another_owner_cannot_be_bound_to_a_token(session_api, world) -> None:
    mallorys_agent = Agent.objects.filter(owner=world.mallory).first()

    response = session_api.post("/api/v1/tokens/", {"kind": "agent", "agent": str(mallorys_agent.pk)})

    assert response.status_code == 400
    assert response.json() == {"agent": ["Unknown agent."]}


def test_revoked_token_answers_401_with_a_clear_message(session_api, owner_api, world) -> None:
    token = world.alice.access_tokens.get(name="scripts")
    assert owner_api.get("/api/v1/people/").status_code == 200

    revoked = session_api.post(f"/api/v1/tokens/{token.pk}/revoke/")
    again = session_api.post(f"/api/v1/tokens/{token.pk}/revoke/")

    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    response = owner_api.get("/api/v1/people/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid or revoked token."}


def test_mallory_cannot_revoke_alices_token_from_her_session(world) -> None:
    token = world.alice.access_tokens.get(name="scripts")
    client = Client()
    client.force_login(world.mallory)

    response = ApiClient(client).post(f"/api/v1/tokens/{token.pk}/revoke/")

    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("Bearer ks_00000000_notarealsecretnotarealsecret", "Invalid or revoked token."),
        ("Bearer garbage", "Invalid or revoked token."),
        ("Bearer", "Malformed Authorization header: expected “Bearer <token>”."),
        ("Bearer two words", "Malformed Authorization header: expected “Bearer <token>”."),
    ],
)
def test_unknown_or_malformed_bearer_token_is_401(world, header, message) -> None:
    response = Client().get("/api/v1/people/", headers={"Authorization": header})

    assert response.status_code == 401
    assert response.json() == {"detail": message}


def test_token_with_right_prefix_but_wrong_secret_is_401(world) -> None:
    real = world.owner_token
    forged = real[: len("ks_12345678_")] + "A" * 43

    response = ApiClient(Client(), forged).get("/api/v1/people/")

    assert response.status_code == 401


def test_token_of_deactivated_user_is_401(world) -> None:
    world.alice.is_active = False
    world.alice.save()

    assert ApiClient(Client(), world.owner_token).get("/api/v1/people/").status_code == 401


def test_use_records_last_used_at_at_most_once_a_minute(world) -> None:
    token = world.alice.access_tokens.get(name="scripts")
    assert token.last_used_at is None

    access_token_authenticate(raw_token=world.owner_token)
    token.refresh_from_db()
    first_use = token.last_used_at
    access_token_authenticate(raw_token=world.owner_token)
    token.refresh_from_db()

    assert first_use is not None
    assert token.last_used_at == first_use
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now() - timedelta(minutes=5))
    access_token_authenticate(raw_token=world.owner_token)
    token.refresh_from_db()
    assert token.last_used_at > first_use


def test_session_calls_need_csrf_but_bearer_calls_do_not(world) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.alice)

    without_csrf = ApiClient(browser).post("/api/v1/people/", {"display_name": "Gina"})
    bearer = ApiClient(Client(enforce_csrf_checks=True), world.owner_token).post(
        "/api/v1/people/", {"display_name": "Gina"}
    )

    assert without_csrf.status_code == 403
    assert "CSRF" in without_csrf.json()["detail"]
    assert bearer.status_code == 201


def test_session_call_with_csrf_token_succeeds(world) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.alice)
    # A JSON GET sets no CSRF cookie; the HTML pages do. Mint one the way Django would.
    csrf = _get_new_csrf_string()
    browser.cookies["csrftoken"] = csrf

    response = browser.post(
        "/api/v1/people/",
        data='{"display_name": "Gina"}',
        content_type="application/json",
        headers={"X-CSRFToken": csrf},
    )

    assert response.status_code == 201


# --- create_token command -----------------------------------------------------------
def test_create_token_command_prints_a_working_owner_token(world, capsys) -> None:
    call_command("create_token", "alice", "--kind", "owner", "--name", "backup script")

    raw = capsys.readouterr().out.strip()
    assert raw.startswith("ks_")
    token = AccessToken.objects.get(prefix=raw.split("_")[1])
    assert (token.owner, token.kind, token.name) == (world.alice, TokenKind.OWNER, "backup script")
    assert ApiClient(Client(), raw).get("/api/v1/memories/").status_code == 200


def test_create_token_command_binds_agent_by_name(world, capsys) -> None:
    call_command("create_token", "alice", "--kind", "agent", "--agent", "caregiver")

    raw = capsys.readouterr().out.strip()
    token = AccessToken.objects.get(prefix=raw.split("_")[1])
    assert token.agent == world.caregiver
    assert ApiClient(Client(), raw).get("/api/v1/memories/").json()["consent_gated"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nobody", "--kind", "owner"], "No user named “nobody”"),
        (["alice", "--kind", "agent"], "--kind agent needs --agent"),
        (["alice", "--kind", "agent", "--agent", "Butler"], "no agent named “Butler”"),
        (["alice", "--kind", "owner", "--agent", "Caregiver"], "--agent only applies"),
    ],
)
def test_create_token_command_explains_bad_arguments(world, args, message) -> None:
    before = AccessToken.objects.count()

    with pytest.raises(CommandError, match=message):
        call_command("create_token", *args)

    assert AccessToken.objects.count() == before


def test_mallorys_agent_name_does_not_bind_to_alice(world) -> None:
    Agent.objects.create(owner=world.mallory, name="Spy")

    with pytest.raises(CommandError, match="no agent named “Spy”"):
        call_command("create_token", "alice", "--kind", "agent", "--agent", "Spy")


def test_service_refuses_agent_token_for_another_owners_agent(world) -> None:
    with pytest.raises(ValidationError):
        access_token_create(
            owner=world.alice,
            kind=TokenKind.AGENT,
            agent=Agent.objects.create(owner=world.mallory, name="Spy"),
        )
