from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models


class ConsentStatus(models.TextChoices):
    GRANTED = "granted", "Granted"
    PENDING = "pending", "Pending"
    REVOKED = "revoked", "Revoked"


class PersonKind(models.TextChoices):
    HUMAN = "human", "Human"
    PET = "pet", "Pet"


class Person(models.Model):
    """Someone (or a pet) in the owner's life. Consent starts pending: fail closed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="people")
    display_name = models.CharField(max_length=200)
    aliases = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    kind = models.CharField(max_length=10, choices=PersonKind.choices, default=PersonKind.HUMAN)
    consent_status = models.CharField(
        max_length=10, choices=ConsentStatus.choices, default=ConsentStatus.PENDING
    )
    consent_updated_at = models.DateTimeField(null=True, blank=True)
    linked_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="linked_people",
    )
    notes = models.TextField(blank=True)
    is_self = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-is_self", "display_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner"], condition=models.Q(is_self=True), name="one_self_person_per_owner"
            ),
            models.CheckConstraint(
                condition=models.Q(consent_status__in=ConsentStatus.values),
                name="person_consent_status_valid",
            ),
        ]
        indexes = [models.Index(fields=["owner", "display_name"])]

    def __str__(self) -> str:
        return self.display_name

    @property
    def entity_id(self) -> str:
        return f"person:{self.id}"

    @property
    def is_consenting(self) -> bool:
        return self.consent_status == ConsentStatus.GRANTED


class ConsentSurface(models.TextChoices):
    UI = "ui", "Web"
    API = "api", "API"


class ConsentEvent(models.Model):
    """Append-only audit of every consent change. Never updated or deleted."""

    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="consent_events")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="consent_events"
    )
    old_status = models.CharField(max_length=10, choices=ConsentStatus.choices)
    new_status = models.CharField(max_length=10, choices=ConsentStatus.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    surface = models.CharField(max_length=10, choices=ConsentSurface.choices)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.person}: {self.old_status} → {self.new_status}"
