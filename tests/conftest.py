from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from config import embedded

hypothesis_settings.register_profile(
    "default", max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("DATABASE_URL") and embedded.postgres_address() is None:
        pytest.exit(embedded.NOT_RUNNING_HELP + "\n(`make test` starts it for you.)", returncode=1)


@pytest.fixture(autouse=True)
def _fast_passwords(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(db):
    """Alice owns a journal (signed up: Self person and built-in agents)."""
    from accounts.services import user_signup

    return user_signup(username="alice", password="correct horse battery")


@pytest.fixture
def mallory(db):
    """Mallory has her own account and no access to Alice's data."""
    from accounts.services import user_signup

    return user_signup(username="mallory", password="correct horse battery")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def mallory_client(client, mallory):
    client.force_login(mallory)
    return client
