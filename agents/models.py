from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class AgentRole(models.TextChoices):
    CAREGIVER = "caregiver", "Caregiver"
    REVIEWER = "reviewer", "Reviewer"
    TUTOR = "tutor", "Tutor"
    BRAINSTORM = "brainstorm", "Brainstorm"
    CUSTOM = "custom", "Custom"


class Agent(models.Model):
    """One of the owner's AI agents. Agents only ever read consent-gated memories."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=20, choices=AgentRole.choices, default=AgentRole.CUSTOM)
    instructions = models.TextField(blank=True)
    is_builtin = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-is_builtin", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_agent_name_per_owner")]

    def __str__(self) -> str:
        return self.name
