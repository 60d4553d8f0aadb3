"""E-mail state: each account's address (verified or waiting), the digest's days, the outbox."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower

from config.models import owner_key


class EmailAddress(models.Model):
    """An account's e-mail address. Optional; only a verified address receives mail that
    acts on the account (a password reset) or speaks about its journal (the digest).

    `address` is the verified one; `pending` waits for its link to be followed, and
    replaces `address` only then, so a typo never takes a working address away.
    """

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_address"
    )
    address = models.EmailField(blank=True)
    verified_at = models.DateTimeField(null=True, blank=True)
    pending = models.EmailField(blank=True)
    pending_sent_at = models.DateTimeField(null=True, blank=True)
    daily_digest = models.BooleanField(default=False)

    class Meta:
        constraints = [
            # One account per verified address: a reset link goes to exactly one account.
            models.UniqueConstraint(
                Lower("address"), name="mail_verified_address_unique", condition=~models.Q(address="")
            ),
        ]

    def __str__(self) -> str:
        return f"{self.owner_id}: {self.address or '(none)'}"

    @property
    def is_verified(self) -> bool:
        return bool(self.address) and self.verified_at is not None


class DigestDay(models.Model):
    """One row per user and local day a digest was made: the unique pair is the "at most once a day"."""

    owner = owner_key("digest_days")
    day = models.DateField()
    created_at = models.DateTimeField(auto_now_add=True)
    # False when there was nothing to say: no message was queued that day.
    sent = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "day"], name="mail_digest_once_a_day")]
        ordering = ["-day"]

    def __str__(self) -> str:
        return f"{self.owner_id}: {self.day}"


class EmailKind(models.TextChoices):
    VERIFY = "verify", "Address verification"
    PASSWORD_RESET = "password_reset", "Password reset"
    CIRCLE_INVITE = "circle_invite", "Circle invitation"
    LINK_INVITE = "link_invite", "Link invitation"
    DIGEST = "digest", "Daily digest"


class OutgoingEmail(models.Model):
    """A message waiting for the worker, or sent.

    Written in the same transaction as the work that asks for it, so the request's work and
    its message commit together; the worker sends it (mail.tasks.send) and the sweep finds
    one whose publish was lost. Once sent, the bodies are emptied: they may hold a link
    that acts on an account, or the owner's own memories (the digest), and the database
    need not keep either.
    """

    kind = models.CharField(max_length=20, choices=EmailKind.choices)
    # Whose message: the account it is about, or the inviter (an invitation to an address).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="outgoing_emails",
    )
    to = models.EmailField()
    subject = models.CharField(max_length=200)
    text = models.TextField(blank=True)
    html = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # A worker holds the message until then; a crashed worker's hold runs out and another sends it.
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.CharField(max_length=500, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["created_at"],
                name="mail_outgoing_unsent_idx",
                condition=models.Q(sent_at=None, failed_at=None),
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} to {self.to}"
