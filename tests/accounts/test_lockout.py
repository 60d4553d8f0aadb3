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
    # Even the right password waits for the cool-off: guessing cannot continue.
    assert client.post("/accounts/login/", RIGHT).status_code == 429
    # …also from another address (per account), and that address is locked too (per address).
    other = client.post("/accounts/login/", RIGHT, REMOTE_ADDR="10.1.2.3")
    assert other.status_code == 429


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
