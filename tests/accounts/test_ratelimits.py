"""Rate limits for tokens (API and MCP), sign-up and password change (accounts/ratelimits.py).

The counts live in the real Valkey cache; tests/conftest.py gives every test keys of
its own. "The window passes" moves django-ratelimit's own clock forward, which starts
a new window exactly as the passing of time does.
"""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth import get_user_model

from accounts import ratelimits
from accounts.models import TokenKind
from accounts.services import access_token_create, user_signup
from agents.models import Agent

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.66"
HOLDER = "198.51.100.7"
WRONG_TOKEN = "ks_0badc0de_" + "x" * 43
MCP_PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})


@pytest.fixture
def limits(settings):
    """Small limits so that a test can reach them; each test changes only what it needs."""
    settings.KEEPSAKE_RATELIMITS = {
        "token_failures_per_address": "3/15m",
        "token_requests_per_account": "1000/m",
        "signup_per_address": "3/h",
        "password_change_failures_per_account": "3/15m",
        "password_change_failures_per_address": "20/15m",
    }
    return settings.KEEPSAKE_RATELIMITS


@pytest.fixture
def owner_token(alice):
    return access_token_create(owner=alice, kind=TokenKind.OWNER, name="laptop")[1]


@pytest.fixture
def agent_token(alice):
    agent = Agent.objects.filter(owner=alice).first()
    return access_token_create(owner=alice, kind=TokenKind.AGENT, agent=agent)[1]


@pytest.fixture
def later(monkeypatch):
    """Move django-ratelimit's clock `seconds` ahead (only its clock: nothing else is touched)."""

    def move(seconds: float) -> None:
        class Clock:
            @staticmethod
            def time() -> float:
                return time.time() + seconds

        monkeypatch.setattr("django_ratelimit.core.time", Clock)

    return move


def api(client, token: str, address: str):
    return client.get("/api/v1/memories/", HTTP_AUTHORIZATION=f"Bearer {token}", REMOTE_ADDR=address)


def mcp(client, token: str, address: str):
    return client.post(
        "/mcp/",
        data=MCP_PING,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
        REMOTE_ADDR=address,
    )


# --- API tokens ----------------------------------------------------------------------


def test_wrong_tokens_from_one_address_answer_429_json_with_retry_after(client, limits, owner_token):
    for _ in range(3):
        assert api(client, WRONG_TOKEN, ATTACKER).status_code == 401
    refused = api(client, WRONG_TOKEN, ATTACKER)
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    assert "Too many failed token attempts from your address" in refused.json()["detail"]
    retry_after = int(refused["Retry-After"])
    assert 0 < retry_after <= 15 * 60
    # Only failures are refused: the right token from the very same address works.
    assert api(client, owner_token, ATTACKER).status_code == 200
    assert api(client, WRONG_TOKEN, ATTACKER).status_code == 429


def test_the_right_token_from_another_address_still_works(client, limits, owner_token):
    for _ in range(10):
        api(client, WRONG_TOKEN, ATTACKER)
    assert api(client, WRONG_TOKEN, ATTACKER).status_code == 429
    assert api(client, owner_token, HOLDER).status_code == 200
    # Nor does the flood count against the account the token belongs to.
    assert api(client, owner_token, HOLDER).status_code == 200


def test_malformed_and_revoked_tokens_count_as_failures(client, limits, alice):
    token, raw = access_token_create(owner=alice, kind=TokenKind.OWNER)
    from accounts.services import access_token_revoke

    access_token_revoke(token=token)
    assert api(client, raw, ATTACKER).status_code == 401
    malformed = client.get("/api/v1/memories/", HTTP_AUTHORIZATION="Bearer a b", REMOTE_ADDR=ATTACKER)
    assert malformed.status_code == 401
    assert api(client, "not-a-token", ATTACKER).status_code == 401
    assert api(client, "not-a-token", ATTACKER).status_code == 429


def test_a_valid_token_always_works_from_an_address_that_sent_thirty_wrong_ones(
    client, settings, owner_token, agent_token
):
    """Issue #40: one stale token on one machine behind a shared router must not cut off the rest."""
    assert settings.KEEPSAKE_RATELIMITS["token_failures_per_address"] == "30/15m"  # the default
    for _ in range(30):
        assert api(client, WRONG_TOKEN, ATTACKER).status_code == 401
    assert api(client, WRONG_TOKEN, ATTACKER).status_code == 429
    assert mcp(client, WRONG_TOKEN, ATTACKER).status_code == 429
    for _ in range(3):
        assert api(client, owner_token, ATTACKER).status_code == 200
        assert mcp(client, agent_token, ATTACKER).status_code == 200
    # The valid requests did not reset the count: failures from the address stay refused.
    assert api(client, WRONG_TOKEN, ATTACKER).status_code == 429


def test_requests_without_a_token_are_not_counted(client, limits, owner_token):
    for _ in range(5):
        assert client.get("/api/v1/memories/", REMOTE_ADDR=ATTACKER).status_code == 401
    assert api(client, owner_token, ATTACKER).status_code == 200


def test_the_address_lock_out_ends_when_the_window_passes(client, limits, owner_token, later):
    for _ in range(4):
        api(client, WRONG_TOKEN, ATTACKER)
    assert api(client, WRONG_TOKEN, ATTACKER).status_code == 429
    later(15 * 60 + 1)
    assert api(client, owner_token, ATTACKER).status_code == 200
    # A fresh window: the address has its full count of attempts again.
    assert api(client, WRONG_TOKEN, ATTACKER).status_code == 401


def test_ipv6_addresses_in_one_64_count_together(client, limits):
    for host in range(3):
        api(client, WRONG_TOKEN, f"2001:db8:1:2::{host + 1}")
    assert api(client, WRONG_TOKEN, "2001:db8:1:2::ffff").status_code == 429
    assert api(client, WRONG_TOKEN, "2001:db8:1:3::1").status_code == 401


def test_an_accounts_tokens_share_a_ceiling_of_requests(client, limits, alice, mallory, owner_token, later):
    limits["token_requests_per_account"] = "3/m"
    agent_raw = access_token_create(
        owner=alice, kind=TokenKind.AGENT, agent=Agent.objects.filter(owner=alice).first()
    )[1]
    mallory_raw = access_token_create(owner=mallory, kind=TokenKind.OWNER)[1]
    assert api(client, owner_token, HOLDER).status_code == 200
    assert api(client, agent_raw, "192.0.2.1").status_code == 200
    assert api(client, owner_token, "192.0.2.2").status_code == 200
    refused = api(client, agent_raw, HOLDER)
    assert refused.status_code == 429
    assert "Too many requests with this account's tokens" in refused.json()["detail"]
    assert int(refused["Retry-After"]) <= 60
    # Another account is not slowed down, from the very same address.
    assert api(client, mallory_raw, HOLDER).status_code == 200
    later(61)
    assert api(client, owner_token, HOLDER).status_code == 200


# --- MCP -------------------------------------------------------------------------------


def test_mcp_wrong_tokens_answer_429_json_and_the_holder_elsewhere_still_works(client, limits, agent_token):
    for _ in range(3):
        assert mcp(client, WRONG_TOKEN, ATTACKER).status_code == 401
    refused = mcp(client, WRONG_TOKEN, ATTACKER)
    assert refused.status_code == 429
    body = refused.json()
    assert body["error"] == "too_many_requests"
    assert "Too many failed token attempts" in body["error_description"]
    assert int(refused["Retry-After"]) == body["retry_after"] > 0
    assert mcp(client, agent_token, ATTACKER).status_code == 200  # only failures are refused
    answered = mcp(client, agent_token, HOLDER)
    assert answered.status_code == 200
    assert answered.json()["result"] == {}


def test_api_and_mcp_failures_share_one_count(client, limits, agent_token):
    api(client, WRONG_TOKEN, ATTACKER)
    mcp(client, WRONG_TOKEN, ATTACKER)
    api(client, WRONG_TOKEN, ATTACKER)
    assert mcp(client, WRONG_TOKEN, ATTACKER).status_code == 429
    assert api(client, WRONG_TOKEN, ATTACKER).status_code == 429
    assert mcp(client, agent_token, ATTACKER).status_code == 200


def test_mcp_without_a_token_is_not_counted(client, limits, agent_token):
    for _ in range(5):
        response = client.post("/mcp/", data=MCP_PING, content_type="application/json", REMOTE_ADDR=ATTACKER)
        assert response.status_code == 401
    assert mcp(client, agent_token, ATTACKER).status_code == 200


# --- Sign-up ---------------------------------------------------------------------------


def signup_data(username: str) -> dict:
    return {"username": username, "password1": "a long Passphrase 42", "password2": "a long Passphrase 42"}


def test_a_sign_up_flood_from_one_address_answers_429_with_a_clear_page(client, limits, later):
    for number in range(3):
        response = client.post("/accounts/signup/", signup_data(f"flood{number}"), REMOTE_ADDR=ATTACKER)
        assert response.status_code == 302
        client.logout()
    refused = client.post("/accounts/signup/", signup_data("flood3"), REMOTE_ADDR=ATTACKER)
    assert refused.status_code == 429
    page = refused.content.decode()
    assert "Too many sign-ups" in page
    assert "Try again in" in page
    assert 0 < int(refused["Retry-After"]) <= 3600
    assert not get_user_model().objects.filter(username="flood3").exists()
    # Someone else signs up from their own address, and the form itself still shows.
    assert client.post("/accounts/signup/", signup_data("neighbour"), REMOTE_ADDR=HOLDER).status_code == 302
    client.logout()
    assert client.get("/accounts/signup/", REMOTE_ADDR=ATTACKER).status_code == 200
    later(3601)
    assert client.post("/accounts/signup/", signup_data("flood3"), REMOTE_ADDR=ATTACKER).status_code == 302


def test_failed_sign_ups_count_too(client, limits):
    # Probing which usernames exist is a sign-up attempt like any other.
    user_signup(username="taken", password="a long Passphrase 42")
    for _ in range(3):
        assert client.post("/accounts/signup/", signup_data("taken"), REMOTE_ADDR=ATTACKER).status_code == 200
    assert client.post("/accounts/signup/", signup_data("taken"), REMOTE_ADDR=ATTACKER).status_code == 429


# --- Password change -------------------------------------------------------------------


def change(client, old: str, address: str = ATTACKER):
    data = {
        "old_password": old,
        "new_password1": "a new Passphrase 43",
        "new_password2": "a new Passphrase 43",
    }
    return client.post("/accounts/password/", data, REMOTE_ADDR=address)


def test_wrong_current_passwords_pause_password_change_with_a_clear_message(alice_client, alice, limits):
    for _ in range(3):
        response = change(alice_client, "not my password")
        assert response.status_code == 200
        assert "Your old password was entered incorrectly" in response.content.decode()
    locked = change(alice_client, "correct horse battery")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Password change paused" in page
    assert "You stay logged in" in page
    assert "Try again in" in page
    assert 0 < int(locked["Retry-After"]) <= 15 * 60
    alice.refresh_from_db()
    assert alice.check_password("correct horse battery")  # nothing changed while paused
    # Per account: another address is paused too; the rest of the journal is not.
    assert change(alice_client, "correct horse battery", address=HOLDER).status_code == 429
    assert alice_client.get("/", REMOTE_ADDR=ATTACKER).status_code == 200


def test_password_change_works_again_when_the_window_passes(alice_client, alice, limits, later):
    for _ in range(3):
        change(alice_client, "not my password")
    assert change(alice_client, "correct horse battery").status_code == 429
    later(15 * 60 + 1)
    assert change(alice_client, "correct horse battery").status_code == 302
    alice.refresh_from_db()
    assert alice.check_password("a new Passphrase 43")


def test_password_change_is_limited_per_address_across_accounts(client, alice, mallory, limits):
    limits["password_change_failures_per_account"] = "100/15m"
    limits["password_change_failures_per_address"] = "2/15m"
    client.force_login(alice)
    change(client, "wrong")
    client.force_login(mallory)
    change(client, "wrong")
    assert change(client, "correct horse battery").status_code == 429
    # Mallory's own account is not paused from where she normally is.
    assert change(client, "correct horse battery", address=HOLDER).status_code == 302


def test_a_new_password_the_validators_refuse_is_not_a_failed_guess(alice_client, limits):
    for _ in range(5):
        data = {"old_password": "correct horse battery", "new_password1": "123", "new_password2": "123"}
        response = alice_client.post("/accounts/password/", data, REMOTE_ADDR=ATTACKER)
        assert response.status_code == 200
    assert change(alice_client, "correct horse battery").status_code == 302


# --- When the cache is down --------------------------------------------------------------


def test_limits_step_aside_when_the_cache_cannot_be_reached(
    client, limits, settings, owner_token, monkeypatch
):
    monkeypatch.setattr(ratelimits, "_cache_down_until", 0.0)
    unreachable = dict(settings.CACHES["ratelimit"], LOCATION="redis://127.0.0.1:1/0")
    settings.CACHES = {**settings.CACHES, "ratelimit": unreachable}
    for _ in range(5):
        assert api(client, WRONG_TOKEN, ATTACKER).status_code == 401
    assert api(client, owner_token, ATTACKER).status_code == 200
    for number in range(5):
        assert (
            client.post("/accounts/signup/", signup_data(f"calm{number}"), REMOTE_ADDR=ATTACKER).status_code
            == 302
        )
        client.logout()
    assert ratelimits._cache_down_until > 0


# --- The cache's client ------------------------------------------------------------------


def test_the_rate_limit_cache_keeps_one_redis_client_and_counts_with_it():
    from django.core.cache import caches

    cache = caches["ratelimit"]
    key = f"client-reuse-{time.monotonic_ns()}"
    assert cache.add(key, 1, 60) is True
    assert cache.add(key, 1, 60) is False  # already there: add never overwrites
    assert cache.incr(key) == 2
    assert cache.get(key) == 2
    first = cache._cache.get_client(key)
    assert cache._cache.get_client(key, write=True) is first
    cache.delete(key)
    assert cache.get(key) is None


def test_incr_counts_an_existing_key_in_one_round_trip_and_never_makes_a_key_without_expiry(monkeypatch):
    from django.core.cache import caches
    from redis import Redis

    cache = caches["ratelimit"]
    key = f"incr-{time.monotonic_ns()}"
    with pytest.raises(ValueError):
        cache.incr(key)
    assert cache.get(key) is None  # not created by the attempt
    assert cache.add(key, 1, 60) is True
    assert cache.incr(key) == 2  # (the first call loads the script)
    commands: list[tuple] = []
    original = Redis.execute_command

    def counted(self, *args, **options):
        commands.append(args)
        return original(self, *args, **options)

    monkeypatch.setattr(Redis, "execute_command", counted)
    assert cache.incr(key, 5) == 7
    assert [command[0] for command in commands] == ["EVALSHA"]
    monkeypatch.setattr(Redis, "execute_command", original)
    client = cache._cache.get_client(key, write=True)
    assert 0 < client.ttl(cache.make_and_validate_key(key)) <= 60  # the window's expiry kept
    cache.delete(key)
    with pytest.raises(ValueError):
        cache.incr(key)
