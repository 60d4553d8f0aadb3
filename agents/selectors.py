from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from agents.models import Agent


def agent_list(*, owner: AbstractBaseUser, only: Agent | None = None) -> QuerySet[Agent]:
    """The owner's agents; `only` narrows to one (an agent token sees itself, not its siblings)."""
    agents = Agent.objects.filter(owner=owner)
    if only is not None:
        agents = agents.filter(pk=only.pk)
    return agents


def agent_get(*, owner: AbstractBaseUser, agent_id: object, only: Agent | None = None) -> Agent:
    """The owner's agent, or 404 — another owner's agent does not exist for you."""
    return get_object_or_404(agent_list(owner=owner, only=only), pk=agent_id)


def agent_get_by_name(*, owner: AbstractBaseUser, name: str) -> Agent | None:
    return Agent.objects.filter(owner=owner, name__iexact=name.strip()).first()
