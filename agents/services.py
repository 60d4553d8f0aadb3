from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser

from agents.models import AccessLog, Agent, AgentRole
from memories.models import Memory

BUILTIN_AGENTS: dict[str, tuple[str, str]] = {
    AgentRole.CAREGIVER: (
        "Caregiver",
        "You help the owner care for the people and pets in their life: remember "
        "needs, routines, appointments and preferences, and suggest kind, practical "
        "next steps.",
    ),
    AgentRole.REVIEWER: (
        "Reviewer",
        "You help the owner look back: summarise periods of their life, notice "
        "patterns and changes, and point to the memories that show them.",
    ),
    AgentRole.TUTOR: (
        "Tutor",
        "You help the owner learn from what they recorded: explain, quiz and connect what they know.",
    ),
    AgentRole.BRAINSTORM: (
        "Brainstorm",
        "You help the owner generate ideas — gifts, plans, projects — grounded in "
        "what their memories say people enjoy.",
    ),
}

# The guarantee is the consent gate, not this sentence; it keeps the model honest.
PRIVACY_INSTRUCTION = (
    "Use only the memories you are given. Do not guess or draw conclusions about people who are not in them."
)


def agent_create_builtins(*, owner: AbstractBaseUser) -> list[Agent]:
    agents = []
    for role, (name, instructions) in BUILTIN_AGENTS.items():
        agent, _ = Agent.objects.get_or_create(
            owner=owner,
            name=name,
            defaults={"role": role, "instructions": instructions, "is_builtin": True},
        )
        agents.append(agent)
    return agents


def access_log_record(
    *,
    owner: AbstractBaseUser,
    memories: Iterable[Memory],
    surface: str,
    agent: Agent | None = None,
    viewer: AbstractBaseUser | None = None,
) -> None:
    """One AccessLog row per memory handed out on `surface`, in one insert."""
    rows = [
        AccessLog(
            owner=owner,
            memory_id=memory.pk,
            surface=surface,
            agent=agent,
            agent_name=agent.name if agent is not None else "",
            viewer=viewer,
        )
        for memory in memories
    ]
    if rows:
        AccessLog.objects.bulk_create(rows)
