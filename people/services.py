from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from people.models import ConsentEvent, ConsentStatus, ConsentSurface, Person, PersonKind


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


@transaction.atomic
def person_set_consent(
    *,
    person: Person,
    status: str,
    actor: AbstractBaseUser | None,
    surface: str = ConsentSurface.UI,
    reason: str = "",
) -> ConsentEvent | None:
    """Change a person's consent and append a ConsentEvent.

    Returns None when the status is unchanged (nothing to record). The row is
    locked so two concurrent changes are recorded in order with correct
    old/new statuses.
    """
    if status not in ConsentStatus.values:
        raise ValidationError({"status": f"Consent must be one of: {', '.join(ConsentStatus.values)}."})
    if surface not in ConsentSurface.values:
        raise ValidationError({"surface": "Unknown surface."})
    locked = Person.objects.select_for_update().get(pk=person.pk)
    if locked.consent_status == status:
        person.consent_status = locked.consent_status
        person.consent_updated_at = locked.consent_updated_at
        return None
    old_status = locked.consent_status
    now = timezone.now()
    Person.objects.filter(pk=person.pk).update(consent_status=status, consent_updated_at=now)
    person.consent_status = status
    person.consent_updated_at = now
    return ConsentEvent.objects.create(
        person=person,
        owner_id=person.owner_id,
        old_status=old_status,
        new_status=status,
        actor=actor,
        surface=surface,
        reason=reason.strip(),
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
