from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class TokenKind(models.TextChoices):
    OWNER = "owner", "Owner"
    AGENT = "agent", "Agent"


class AccessToken(models.Model):
    """A bearer token for the API (and MCP).

    Only the prefix is stored readable; the secret is kept as a SHA-256 hash, so
    the full token is shown once, when it is created. `kind=agent` binds the
    token to one of the owner's agents: every read it makes is consent-gated.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens"
    )
    kind = models.CharField(max_length=10, choices=TokenKind.choices)
    # Deleting an agent must take its tokens with it, never leave an unbound one.
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, null=True, blank=True, related_name="access_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(kind=TokenKind.OWNER, agent__isnull=True)
                    | models.Q(kind=TokenKind.AGENT, agent__isnull=False)
                ),
                name="access_token_agent_iff_agent_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"ks_{self.prefix}_… ({self.kind})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def is_agent(self) -> bool:
        return self.kind == TokenKind.AGENT
