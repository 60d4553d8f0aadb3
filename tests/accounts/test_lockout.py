"""Failed logins are limited (django-axes): a clear 429 page, a lock-out that always ends."""

from __future__ import annotations

from datetime import timedelta

import pytest

pytestmark = pytest.mark.django_db

WRONG = {"username": "alice", "password": "not her password"}
RIGHT = {"username": "alice", "password": "correct horse battery"}


@pytest.fixture
def limited(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def test_too_many_wrong_passwords_lock_the_account_with_a_clear_page(client, alice, limited):
    for _ in range(2):
        assert client.post("/accounts/login/", WRONG).status_code == 200  # the form again, with its error
    locked = client.post("/accounts/login/", WRONG)
    assert locked.status_code == 429
    assert "Too many attempts" in locked.content.decode()
    # Even the right password waits for the cool-off: guessing cannot continue from there.
    assert client.post("/accounts/login/", RIGHT).status_code == 429


def test_wrong_passwords_from_one_address_never_lock_the_owner_out_from_another(client, alice, limited):
    """Issue #40: counted per (username, address), so a stranger's guesses cost the owner nothing."""
    for _ in range(3):
        client.post("/accounts/login/", WRONG, REMOTE_ADDR="203.0.113.66")
    assert client.post("/accounts/login/", RIGHT, REMOTE_ADDR="203.0.113.66").status_code == 429
    assert client.post("/accounts/login/", RIGHT, REMOTE_ADDR="198.51.100.7").status_code == 302
    # Another account from the guessing address is not locked either.
    client.logout()
    bob_like = {"username": "mallory", "password": "wrong too"}
    assert client.post("/accounts/login/", bob_like, REMOTE_ADDR="203.0.113.66").status_code == 200


@pytest.mark.parametrize(
    "username", ["a" * 256, "a" * 100_000, "ali\x00ce", "\x00" * 300, "é" * 300, " " * 300]
)
def test_any_username_is_a_failed_login_not_a_500(client, alice, username):
    response = client.post("/accounts/login/", {"username": username, "password": "whatever"})
    assert response.status_code == 200  # the form again, with its error


def test_the_lock_out_ends_on_its_own(client, alice, limited, settings):
    for _ in range(3):
        client.post("/accounts/login/", WRONG)
    assert client.post("/accounts/login/", RIGHT).status_code == 429
    settings.AXES_COOLOFF_TIME = timedelta(seconds=0)
    response = client.post("/accounts/login/", RIGHT)
    assert response.status_code == 302


def test_a_successful_login_clears_the_count(client, alice, limited):
    client.post("/accounts/login/", WRONG)
    client.post("/accounts/login/", WRONG)
    assert client.post("/accounts/login/", RIGHT).status_code == 302
    client.logout()
    client.post("/accounts/login/", WRONG)
    client.post("/accounts/login/", WRONG)
    assert client.post("/accounts/login/", RIGHT).status_code == 302
