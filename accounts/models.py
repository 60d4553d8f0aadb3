from __future__ import annotations

from django.db import models
from django.utils import timezone

from config.models import UUIDModel, owner_key


class TokenKind(models.TextChoices):
    OWNER = "owner", "Owner"
    AGENT = "agent", "Agent"


class AccessToken(UUIDModel):
    """A bearer token for the API (and MCP).

    Only the prefix is stored readable; the secret is kept as a SHA-256 hash, so
    the full token is shown once, when it is created. `kind=agent` binds the
    token to one of the owner's agents: every read it makes is consent-gated.
    """

    owner = owner_key("access_tokens")
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


# --- Accounts worth trusting: second factors, passkeys, signed-in browsers ---------------
# The authenticator app's secret (TOTP) is django-otp's TOTPDevice; the rows below are the
# rest. Each is scoped by `owner`, like every table that holds one person's data.


class RecoveryCode(models.Model):
    """One single-use recovery code. Only its SHA-256 is kept: the codes are shown once.

    A code is 50 random bits, so a plain hash is enough (nothing to guess from it);
    `used_at` is set by a conditional UPDATE, so two requests can never both use one.
    """

    owner = owner_key("recovery_codes")
    code_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "code_hash"], name="recovery_code_unique_per_owner"),
        ]

    def __str__(self) -> str:
        return f"recovery code of {self.owner_id} ({'used' if self.used_at else 'unused'})"


class Passkey(models.Model):
    """A WebAuthn credential (a passkey) the owner registered: its id, public key and counter."""

    owner = owner_key("passkeys")
    name = models.CharField(max_length=60)
    credential_id = models.BinaryField(max_length=1023, unique=True)
    public_key = models.BinaryField()
    sign_count = models.BigIntegerField(default=0)
    # "singleDevice" or "multiDevice" (synced passkeys), as the authenticator said.
    device_type = models.CharField(max_length=20, blank=True)
    backed_up = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"passkey {self.name!r} of {self.owner_id}"


class SignedInSession(UUIDModel):
    """One signed-in browser: the Sessions page's row, keyed by the session it describes.

    Small on purpose: the device is a few words read from the User-Agent, and
    `last_seen_at` is written at most once a minute per session (accounts/middleware.py).
    Signing a browser out deletes its session from the session store and this row.
    """

    # The page names a browser by `id` (UUIDModel), never by this key: the key is a bearer secret.
    session_key = models.CharField(max_length=40, unique=True)
    owner = owner_key("signed_in_sessions")
    device = models.CharField(max_length=100)
    address = models.GenericIPAddressField(null=True, blank=True)
    # How this browser signed in: "password", "password and authenticator code", "passkey", ...
    method = models.CharField(max_length=60, blank=True)
    signed_in_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-last_seen_at"]
        indexes = [models.Index(fields=["owner", "-last_seen_at"], name="signed_in_session_owner_idx")]

    def __str__(self) -> str:
        return f"{self.device} of {self.owner_id}"
