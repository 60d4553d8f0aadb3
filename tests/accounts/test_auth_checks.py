"""Authentication basics, verified: password rules, session rotation, hashed tokens."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.test import Client

from accounts import services
from accounts.models import AccessToken, TokenKind
from accounts.services import access_token_authenticate, access_token_create

pytestmark = pytest.mark.django_db

GOOD = "a long Passphrase 42"


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("Xq7!a", "This password is too short"),
        ("password123", "This password is too common"),
        ("4815162342", "This password is entirely numeric"),
        ("rosalind-franklin", "The password is too similar to the username"),
        ("x" * 1001, "This password is too long"),
    ],
)
def test_signup_checks_the_password_against_every_validator(client, password, message):
    data = {"username": "rosalind-franklin", "password1": password, "password2": password}
    response = client.post("/accounts/signup/", data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not get_user_model().objects.filter(username="rosalind-franklin").exists()


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ("Xq7!a", "This password is too short"),
        ("password123", "This password is too common"),
        ("4815162342", "This password is entirely numeric"),
        ("alice1990", "The password is too similar to the username"),
    ],
)
def test_password_change_checks_the_new_password_against_every_validator(
    alice_client, alice, password, message
):
    data = {"old_password": "correct horse battery", "new_password1": password, "new_password2": password}
    response = alice_client.post("/accounts/password/", data)
    assert response.status_code == 200
    assert message in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("correct horse battery")


def _session_key(client: Client) -> str:
    return client.cookies["sessionid"].value


def test_logging_in_rotates_the_session_key(client, alice):
    before = client.session  # an anonymous session, as a visitor has one
    before["seen"] = True
    before.save()
    anonymous_key = _session_key(client)
    response = client.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"})
    assert response.status_code == 302
    assert _session_key(client) != anonymous_key
    # The old key is gone: someone who planted or read it before login gets nothing.
    assert not Session.objects.filter(session_key=anonymous_key).exists()
    assert client.get("/").status_code == 200


def test_signing_up_rotates_the_session_key(client):
    before = client.session
    before["seen"] = True
    before.save()
    anonymous_key = _session_key(client)
    data = {"username": "newcomer", "password1": GOOD, "password2": GOOD}
    assert client.post("/accounts/signup/", data).status_code == 302
    assert _session_key(client) != anonymous_key
    assert not Session.objects.filter(session_key=anonymous_key).exists()


def test_changing_the_password_ends_other_sessions_and_keeps_this_one(alice, alice_client):
    elsewhere = Client()
    elsewhere.force_login(alice)
    assert elsewhere.get("/").status_code == 200
    data = {"old_password": "correct horse battery", "new_password1": GOOD, "new_password2": GOOD}
    assert alice_client.post("/accounts/password/", data).status_code == 302
    assert alice_client.get("/").status_code == 200
    assert elsewhere.get("/").status_code == 302  # to the login page


def test_tokens_are_stored_only_as_a_hash(alice):
    token, raw = access_token_create(owner=alice, kind=TokenKind.OWNER)
    row = AccessToken.objects.values().get(pk=token.pk)
    secret = raw.split("_", 2)[2]
    assert not any(secret in str(value) for value in row.values())
    assert row["secret_hash"] == hashlib.sha256(raw.encode()).hexdigest()
    assert raw.startswith(f"ks_{row['prefix']}_")


def test_tokens_are_compared_in_constant_time_even_for_an_unknown_prefix(alice, monkeypatch):
    token, raw = access_token_create(owner=alice, kind=TokenKind.OWNER)
    compared: list[tuple[str, str]] = []
    compare_digest = hmac.compare_digest

    def spy(a: str, b: str) -> bool:
        compared.append((a, b))
        return compare_digest(a, b)

    monkeypatch.setattr(services.hmac, "compare_digest", spy)
    assert access_token_authenticate(raw_token=raw) == token
    wrong_secret = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    assert access_token_authenticate(raw_token=wrong_secret) is None
    unknown_prefix = f"ks_{'0' * 8 if token.prefix != '0' * 8 else '1' * 8}_{raw.split('_', 2)[2]}"
    assert access_token_authenticate(raw_token=unknown_prefix) is None
    assert len(compared) == 3
    assert compared[0] == (token.secret_hash, token.secret_hash)
    assert compared[2][1] == hashlib.sha256(unknown_prefix.encode()).hexdigest()


def _fields(instance) -> dict:
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


@pytest.mark.parametrize("kind", [TokenKind.OWNER, TokenKind.AGENT])
def test_the_token_lookup_loads_what_select_related_loads(alice, kind, django_assert_num_queries):
    # One plain statement (config.rows) instead of the ORM's: the same token, owner and agent.
    agent = alice.agents.order_by("name").first() if kind == TokenKind.AGENT else None
    token, raw = access_token_create(owner=alice, kind=kind, agent=agent, name="lookup")
    alice.last_login = None  # a null column among the owner's: converted as the ORM does
    alice.save(update_fields=["last_login"])
    orm = AccessToken.objects.select_related("owner", "agent").get(prefix=token.prefix)
    with django_assert_num_queries(1):
        loaded = services._token_with_prefix(token.prefix)
        owner, loaded_agent = loaded.owner, loaded.agent  # cached, as select_related leaves them
        # And the agent's owner is the token's, loaded once (A2A asks for it on every request).
        assert loaded_agent is None or loaded_agent.owner is owner
    assert _fields(loaded) == _fields(orm)
    assert _fields(owner) == _fields(orm.owner) and owner.pk == alice.pk
    if agent is None:
        assert loaded_agent is None
    else:
        assert _fields(loaded_agent) == _fields(orm.agent) and loaded_agent.pk == agent.pk
    assert not loaded._state.adding and loaded._state.db == "default"
    assert services._token_with_prefix("0" * 8 if token.prefix != "0" * 8 else "1" * 8) is None
    # The whole check still works on it: the right token, then revoked.
    assert access_token_authenticate(raw_token=raw) == token
    services.access_token_revoke(token=token)
    assert access_token_authenticate(raw_token=raw) is None
