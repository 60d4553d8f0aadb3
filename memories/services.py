from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from memories.lifecycle import memory_apply_expiry, memory_resolve_kind_and_sensitivity
from memories.models import Memory, MemoryKind, MemoryParticipant, ParticipantRole, Sensitivity
from people.models import Person
from people.services import person_create


@dataclass(frozen=True)
class ParticipantSpec:
    person: Person
    role: str = ParticipantRole.SUBJECT


def _validate_participants(
    *, owner: AbstractBaseUser, participants: Iterable[ParticipantSpec]
) -> list[ParticipantSpec]:
    specs = list(participants)
    seen: set = set()
    for spec in specs:
        if spec.person.owner_id != owner.pk:
            # Never reveal that the id exists for someone else.
            raise ValidationError({"participants": "Unknown person."})
        if spec.role not in ParticipantRole.values:
            raise ValidationError({"participants": f"Unknown role “{spec.role}”."})
        if spec.person.pk in seen:
            raise ValidationError({"participants": f"{spec.person.display_name} is listed more than once."})
        seen.add(spec.person.pk)
    return specs


def _validate_fields(*, body: str, kind: str, sensitivity: str, source_person: Person | None, owner) -> None:
    errors: dict[str, str] = {}
    if not body.strip():
        errors["body"] = "Write something: a memory needs a body."
    if kind not in MemoryKind.values:
        errors["kind"] = f"Unknown kind “{kind}”."
    if sensitivity not in Sensitivity.values:
        errors["sensitivity"] = f"Unknown sensitivity “{sensitivity}”."
    if source_person is not None and source_person.owner_id != owner.pk:
        errors["source_person"] = "Unknown person."
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def memory_create(
    *,
    owner: AbstractBaseUser,
    body: str,
    title: str = "",
    occurred_at: datetime | None = None,
    kind: str | None = None,
    sensitivity: str | None = None,
    source_person: Person | None = None,
    participants: Iterable[ParticipantSpec] = (),
) -> Memory:
    """Save a memory and its participants in one transaction: all or nothing.

    A kind or sensitivity left as None is inferred from the text (memories/lifecycle.py);
    text holding a secret is refused before anything is written.
    """
    kind, sensitivity = memory_resolve_kind_and_sensitivity(
        title=title, body=body, kind=kind, sensitivity=sensitivity
    )
    _validate_fields(body=body, kind=kind, sensitivity=sensitivity, source_person=source_person, owner=owner)
    specs = _validate_participants(owner=owner, participants=participants)
    memory = Memory(
        owner=owner,
        body=body.strip(),
        title=title.strip(),
        occurred_at=occurred_at or timezone.now(),
        kind=kind,
        sensitivity=sensitivity,
        source_person=source_person,
    )
    memory_apply_expiry(memory=memory)
    memory.save(force_insert=True)
    MemoryParticipant.objects.bulk_create(
        MemoryParticipant(memory=memory, person=spec.person, role=spec.role) for spec in specs
    )
    return memory


@transaction.atomic
def memory_update(
    *,
    memory: Memory,
    body: str,
    title: str = "",
    occurred_at: datetime | None = None,
    kind: str | None = None,
    sensitivity: str | None = None,
    source_person: Person | None = None,
    participants: Iterable[ParticipantSpec] | None = None,
) -> Memory:
    """Edit a memory; when `participants` is given it replaces the whole set."""
    owner = memory.owner
    kind, sensitivity = memory_resolve_kind_and_sensitivity(
        title=title, body=body, kind=kind, sensitivity=sensitivity
    )
    _validate_fields(body=body, kind=kind, sensitivity=sensitivity, source_person=source_person, owner=owner)
    specs = None if participants is None else _validate_participants(owner=owner, participants=participants)
    memory.body = body.strip()
    memory.title = title.strip()
    if occurred_at is not None:
        memory.occurred_at = occurred_at
    memory.kind = kind
    memory.sensitivity = sensitivity
    memory.source_person = source_person
    memory_apply_expiry(memory=memory)
    memory.save()
    if specs is not None:
        MemoryParticipant.objects.filter(memory=memory).delete()
        MemoryParticipant.objects.bulk_create(
            MemoryParticipant(memory=memory, person=spec.person, role=spec.role) for spec in specs
        )
    return memory


@transaction.atomic
def memory_delete(*, memory: Memory) -> None:
    memory.delete()


@dataclass(frozen=True)
class NewPersonSpec:
    """Someone typed in by name while writing a memory; created pending."""

    display_name: str
    role: str = ParticipantRole.SUBJECT


def _create_new_people(
    *, owner: AbstractBaseUser, new_people: Iterable[NewPersonSpec]
) -> list[ParticipantSpec]:
    return [
        ParticipantSpec(person=person_create(owner=owner, display_name=spec.display_name), role=spec.role)
        for spec in new_people
    ]


@transaction.atomic
def memory_create_with_new_people(
    *,
    owner: AbstractBaseUser,
    body: str,
    title: str = "",
    occurred_at: datetime | None = None,
    kind: str | None = None,
    sensitivity: str | None = None,
    source_person: Person | None = None,
    participants: Iterable[ParticipantSpec] = (),
    new_people: Iterable[NewPersonSpec] = (),
) -> Memory:
    """memory_create, also creating people typed in by name.

    One transaction: if the memory is refused, the new people are not kept.
    """
    specs = [*participants, *_create_new_people(owner=owner, new_people=new_people)]
    return memory_create(
        owner=owner,
        body=body,
        title=title,
        occurred_at=occurred_at,
        kind=kind,
        sensitivity=sensitivity,
        source_person=source_person,
        participants=specs,
    )


@transaction.atomic
def memory_update_with_new_people(
    *,
    memory: Memory,
    body: str,
    title: str = "",
    occurred_at: datetime | None = None,
    kind: str | None = None,
    sensitivity: str | None = None,
    source_person: Person | None = None,
    participants: Iterable[ParticipantSpec] = (),
    new_people: Iterable[NewPersonSpec] = (),
) -> Memory:
    """memory_update replacing the participants, also creating people typed in by name (atomic)."""
    specs = [*participants, *_create_new_people(owner=memory.owner, new_people=new_people)]
    return memory_update(
        memory=memory,
        body=body,
        title=title,
        occurred_at=occurred_at,
        kind=kind,
        sensitivity=sensitivity,
        source_person=source_person,
        participants=specs,
    )
