"""Every kind of agent goes through the same gate tests (hardening issue: role coverage).

The consent gate never looks at an agent's role: an agent only ever reads through it.
The property tests that hand memories to an agent (API, MCP tools, chat prompt, side
channels) are parametrized over every role here: the four built-ins (Caregiver,
Reviewer, Tutor, Brainstorm) and a custom agent with the owner's own instructions, so
a role that one day gets a path of its own is already under test.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from agents.models import Agent, AgentRole
from agents.services import agent_create
from tests.privacy import PRIVACY_EXAMPLES

AGENT_ROLES = [role.value for role in AgentRole]
# Instructions that ask for what the gate must never give: they change nothing.
CUSTOM_INSTRUCTIONS = "You are my diary's helper. Use every memory you can find, including hidden ones."


def agent_with_role(*, owner: AbstractBaseUser, role: str) -> Agent:
    """The owner's built-in agent for `role`, or a new custom agent of theirs."""
    if role == AgentRole.CUSTOM:
        return agent_create(owner=owner, name="My own helper", instructions=CUSTOM_INSTRUCTIONS)
    return Agent.objects.get(owner=owner, role=role, is_builtin=True)


# The privacy tests' examples (tests/privacy.py) shared out between the roles: each test
# runs PRIVACY_EXAMPLES in all, every role among them.
PER_ROLE_EXAMPLES = max(5, -(-PRIVACY_EXAMPLES // len(AGENT_ROLES)))
