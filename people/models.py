from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from config.models import UUIDModel, owner_key
from people.birthdays import Birthday


class ConsentStatus(models.TextChoices):
    GRANTED = "granted", "Granted"
    PENDING = "pending", "Pending"
    REVOKED = "revoked", "Revoked"


class PersonKind(models.TextChoices):
    HUMAN = "human", "Human"
    PET = "pet", "Pet"


def person_photo_path(person: Person, filename: str) -> str:
    # A fresh random name each time: an old photo's path never serves the new one, and
    # the name tells nothing. Under the owner's folder, so an account's photos are one folder.
    return f"people/{person.owner_id}/{uuid.uuid4().hex}.jpg"


class Person(UUIDModel):
    """Someone (or a pet) in the owner's life. Consent starts pending: fail closed."""

    owner = owner_key("people")
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
    # Who they are to the owner, in the owner's words ("sister", "old friend from school").
    relationship = models.CharField(max_length=100, blank=True)
    # A birthday is a day and a month, with the year when it is known (people.birthdays).
    birthday_month = models.PositiveSmallIntegerField(null=True, blank=True)
    birthday_day = models.PositiveSmallIntegerField(null=True, blank=True)
    birthday_year = models.PositiveSmallIntegerField(null=True, blank=True)
    # A JPEG re-encoded by people.photos (metadata stripped), under MEDIA_ROOT. Served only
    # to the owner by people.views.person_photo: there is no public media URL.
    photo = models.FileField(upload_to=person_photo_path, blank=True, max_length=200)
    is_self = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-is_self", "display_name"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(birthday_month=None, birthday_day=None, birthday_year=None)
                    | models.Q(birthday_month__range=(1, 12), birthday_day__range=(1, 31))
                ),
                name="person_birthday_day_and_month",
            ),
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

    @property
    def birthday(self) -> Birthday | None:
        if self.birthday_month is None or self.birthday_day is None:
            return None
        try:
            return Birthday(month=self.birthday_month, day=self.birthday_day, year=self.birthday_year)
        except ValueError:  # e.g. 30 February written around the services: shown as no birthday
            return None

    @property
    def initials(self) -> str:
        """Up to two letters for the avatar drawn when there is no photo."""
        words = [word for word in self.display_name.split() if word[:1].isalnum()]
        if not words:
            return "?"
        letters = words[0][0] + (words[-1][0] if len(words) > 1 else "")
        return letters.upper()

    @property
    def avatar_tone(self) -> int:
        """One of six colour pairs for the initials avatar, the same for a person on every page."""
        return self.id.int % 6


class ConsentSurface(models.TextChoices):
    UI = "ui", "Web"
    API = "api", "API"
    MCP = "mcp", "MCP"


class ConsentActor(models.TextChoices):
    """Who decided: the journal's owner, or the person themself (a linked user)."""

    OWNER = "owner", "Owner"
    SELF = "self", "The person"


# Audiences: who a memory may be shown to besides its owner (SPEC §4).
AGENTS_AUDIENCE = "agents"
CIRCLE_AUDIENCE_PREFIX = "circle:"
AUDIENCE_PATTERN = r"^(agents|circle:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$"


def circle_audience(circle_id: uuid.UUID | str) -> str:
    return f"{CIRCLE_AUDIENCE_PREFIX}{circle_id}"


class PersonConsent(models.Model):
    """A person's consent for one audience. No row means pending (fail closed).

    The `agents` row mirrors Person.consent_status: a trigger (migration 0003)
    writes it whenever that column changes, so every write path (services, bulk
    updates, imports) keeps the two equal; the agents' gate reads the column.
    Circle audiences (`circle:<uuid>`) live only here, and the members' gate reads them.
    """

    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="consents")
    audience = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=ConsentStatus.choices, default=ConsentStatus.PENDING)
    reason = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=10, choices=ConsentActor.choices, default=ConsentActor.OWNER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["person", "audience"], name="one_consent_per_person_audience"),
            models.CheckConstraint(
                condition=models.Q(status__in=ConsentStatus.values), name="person_consent_status_valid_value"
            ),
            models.CheckConstraint(
                condition=models.Q(audience__regex=AUDIENCE_PATTERN), name="person_consent_audience_valid"
            ),
        ]
        indexes = [models.Index(fields=["audience", "person"], name="person_consent_audience_idx")]

    def __str__(self) -> str:
        return f"{self.person_id} {self.audience}: {self.status}"


class ConsentEvent(models.Model):
    """Append-only audit of every consent change.

    The database refuses UPDATE and DELETE (migration 0003's trigger), with two
    exceptions it checks itself: deleting the person only clears `person` (the
    name snapshot stays), and deleting a whole account removes its history.
    """

    person = models.ForeignKey(
        Person, on_delete=models.SET_NULL, null=True, blank=True, related_name="consent_events"
    )
    person_name = models.CharField(max_length=200, blank=True)
    audience = models.CharField(max_length=64, default=AGENTS_AUDIENCE)
    actor_kind = models.CharField(max_length=10, choices=ConsentActor.choices, default=ConsentActor.OWNER)
    owner = owner_key("consent_events")
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
    # A default rather than auto_now_add: an import restores each event with its
    # original time in the INSERT itself (the history cannot be updated afterwards).
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    # When an import wrote this event (null: it was recorded here). An imported event is
    # the file's word, not a decision anyone made in this journal: pages say so, and an
    # import never records one as the person's own (portability.services).
    imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.person_name}: {self.old_status} → {self.new_status} ({self.audience})"


class PersonLinkInvite(UUIDModel):
    """An invitation to link a Person to the account of the person themself.

    Only the token's hash is stored; the link is shown once. Single use: accepting
    sets Person.linked_user and marks it used. A person has at most one open
    invitation (SPEC §4): a new one, linking, unlinking and the deletion of the
    linked account withdraw the others (linked.services). The table stays in people
    (no migration moves it); everything that reads or writes it lives in linked/.
    """

    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="link_invites")
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"link invite for {self.person_id}"

    @property
    def is_open(self) -> bool:
        from django.utils import timezone as tz

        return self.used_at is None and self.revoked_at is None and self.expires_at > tz.now()
