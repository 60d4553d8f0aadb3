"""Personas: Alice owns the circle, Bob is in it, Mallory has no access (healthchecks' BaseTestCase)."""

from __future__ import annotations

import pytest

from circles.models import CircleMembership, MembershipRole
from circles.services import circle_create
from tests.agents.conftest import llm_stub, offline  # noqa: F401 (the local LLM stub, shared)


@pytest.fixture
def bob(db):
    from accounts.services import user_signup

    return user_signup(username="bob", password="correct horse battery")


@pytest.fixture
def family(alice, bob):
    """Alice's circle "Family", with Bob as a member."""
    circle = circle_create(owner=alice, name="Family", description="Grandma's stories")
    CircleMembership.objects.create(circle=circle, user=bob, role=MembershipRole.MEMBER)
    return circle
