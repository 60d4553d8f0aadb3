from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from people.models import (
    AGENTS_AUDIENCE,
    CIRCLE_AUDIENCE_PREFIX,
    ConsentActor,
    ConsentEvent,
    ConsentStatus,
    ConsentSurface,
    Person,
    PersonConsent,
    PersonKind,
    circle_audience,
)

MAX_REASON_LENGTH = 2000


def _clean_aliases(aliases: list[str] | None) -> list[str]:
    seen: list[str] = []
    for alias in aliases or []:
        alias = alias.strip()
        if alias and alias not in seen:
            seen.append(alias)
    return seen


def person_create(
    *,
    owner: AbstractBaseUser,
    display_name: str,
    aliases: list[str] | None = None,
    kind: str = PersonKind.HUMAN,
    notes: str = "",
) -> Person:
    """A new person always starts with consent pending (fail closed)."""
    display_name = display_name.strip()
    if not display_name:
        raise ValidationError({"display_name": "A name is required."})
    person = Person(
        owner=owner,
        display_name=display_name,
        aliases=_clean_aliases(aliases),
        kind=kind,
        notes=notes,
        consent_status=ConsentStatus.PENDING,
    )
    person.full_clean()
    person.save()
    return person


def person_create_self(*, owner: AbstractBaseUser) -> Person:
    """The owner's own Person: they consent to their own memories."""
    now = timezone.now()
    return Person.objects.create(
        owner=owner,
        display_name="Self",
        is_self=True,
        linked_user=owner,
        consent_status=ConsentStatus.GRANTED,
        consent_updated_at=now,
    )


def person_update(
    *,
    person: Person,
    display_name: str,
    aliases: list[str] | None = None,
    kind: str | None = None,
    notes: str | None = None,
) -> Person:
    """Edit details. Consent is never changed here: see person_set_consent."""
    display_name = display_name.strip()
    if not display_name:
        raise ValidationError({"display_name": "A name is required."})
    person.display_name = display_name
    person.aliases = _clean_aliases(aliases)
    if kind is not None:
        person.kind = kind
    if notes is not None:
        person.notes = notes
    person.full_clean()
    person.save()
    return person


def audience_validate(audience: str) -> str:
    """`agents` or `circle:<uuid>` (lower-case uuid), or a ValidationError that says so."""
    audience = (audience or "").strip().lower()
    if audience == AGENTS_AUDIENCE:
        return audience
    if audience.startswith(CIRCLE_AUDIENCE_PREFIX):
        try:
            return circle_audience(uuid.UUID(audience[len(CIRCLE_AUDIENCE_PREFIX) :]))
        except ValueError:
            pass
    raise ValidationError({"audience": "An audience is 'agents' or 'circle:<circle id>'."})


@transaction.atomic
def person_set_consent(
    *,
    person: Person,
    status: str,
    actor: AbstractBaseUser | None,
    surface: str = ConsentSurface.UI,
    reason: str = "",
    audience: str = AGENTS_AUDIENCE,
    actor_kind: str = ConsentActor.OWNER,
) -> ConsentEvent | None:
    """Change a person's consent for one audience and append a ConsentEvent.

    Returns None when the status is unchanged (nothing to record). The person row
    is locked first, whatever the audience, so two concurrent changes of one
    person are recorded in order with correct old/new statuses. For `agents` the
    column Person.consent_status is written (the agents' gate reads it; a trigger
    mirrors it into PersonConsent); circle audiences live in PersonConsent only.
    A Self person counts as granted for every circle (sharing your own memory is
    your consent), so only its `agents` consent can be set.
    """
    if status not in ConsentStatus.values:
        raise ValidationError({"status": f"Consent must be one of: {', '.join(ConsentStatus.values)}."})
    if surface not in ConsentSurface.values:
        raise ValidationError({"surface": "Unknown surface."})
    if actor_kind not in ConsentActor.values:
        raise ValidationError({"actor": "Unknown actor."})
    audience = audience_validate(audience)
    reason = (reason or "").strip()
    if len(reason) > MAX_REASON_LENGTH:
        raise ValidationError({"reason": f"A reason is at most {MAX_REASON_LENGTH} characters."})
    locked = Person.objects.select_for_update().get(pk=person.pk)
    if locked.is_self and audience != AGENTS_AUDIENCE:
        raise ValidationError(
            {"audience": "Your own consent for a circle is given by sharing a memory into it."}
        )
    now = timezone.now()
    if audience == AGENTS_AUDIENCE:
        old_status = locked.consent_status
        person.consent_status = locked.consent_status
        person.consent_updated_at = locked.consent_updated_at
        if old_status == status:
            return None
        Person.objects.filter(pk=person.pk).update(consent_status=status, consent_updated_at=now)
        person.consent_status = status
        person.consent_updated_at = now
        # The trigger has written the status; the reason and who decided are ours.
        PersonConsent.objects.filter(person=person, audience=audience).update(
            reason=reason, updated_by=actor_kind, updated_at=now
        )
    else:
        current = PersonConsent.objects.filter(person=person, audience=audience).first()
        old_status = current.status if current is not None else ConsentStatus.PENDING
        if old_status == status:
            return None
        PersonConsent.objects.update_or_create(
            person=person,
            audience=audience,
            defaults={"status": status, "reason": reason, "updated_by": actor_kind},
        )
    return ConsentEvent.objects.create(
        person=person,
        person_name=locked.display_name,
        owner_id=person.owner_id,
        audience=audience,
        old_status=old_status,
        new_status=status,
        actor=actor,
        actor_kind=actor_kind,
        surface=surface,
        reason=reason,
    )


class PersonInUse(Exception):
    def __init__(self, person: Person, memory_count: int) -> None:
        self.person = person
        self.memory_count = memory_count
        super().__init__(
            f"{person.display_name} is in {memory_count} "
            f"memor{'y' if memory_count == 1 else 'ies'}; remove them from "
            f"{'it' if memory_count == 1 else 'those'} before deleting."
        )


@transaction.atomic
def person_delete(*, person: Person) -> None:
    """Delete a person who is in no memory, as a participant or as its source.

    Dropping a participant (or clearing a "told by") silently would make the
    memory visible to agents without that person's consent, so a person still
    in memories is refused.
    """
    from memories.models import Memory

    if person.is_self:
        raise ValidationError("Your own entry (Self) cannot be deleted.")
    memory_count = (
        Memory.objects.filter(Q(participants__person=person) | Q(source_person=person)).distinct().count()
    )
    if memory_count:
        raise PersonInUse(person, memory_count)
    person.delete()
