from __future__ import annotations

import uuid
from collections.abc import Iterable

from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404

from memories.models import Memory, MemoryParticipant
from people.models import Person


def insight_source_memories(*, owner: AbstractBaseUser, memory_ids: Iterable[object]) -> list[Memory]:
    """The owner's memories an insight is to be written from, in the order asked; 404 for any other id."""
    ids: list[uuid.UUID] = []
    for memory_id in memory_ids:
        try:
            parsed = uuid.UUID(str(memory_id))
        except ValueError:
            raise Http404("No such memory.") from None
        if parsed not in ids:
            ids.append(parsed)
    found = {memory.pk: memory for memory in Memory.objects.filter(owner=owner, pk__in=ids)}
    if len(found) != len(ids):
        raise Http404("No such memory.")
    return [found[memory_id] for memory_id in ids]


def insight_sources(*, owner: AbstractBaseUser, memory: Memory) -> list[Memory]:
    """The memories `memory` was generalised from: for its owner's eyes only."""
    if memory.owner_id != owner.pk:
        return []
    return list(
        Memory.objects.filter(owner=owner, pk__in=memory.insight_sources.values("source_id")).order_by(
            "-occurred_at"
        )
    )


def insight_people(memories: Iterable[Memory]) -> list[Person]:
    """Everyone in `memories` (participants and who told them), the owner's Self aside: their names block."""
    memory_ids = [memory.pk for memory in memories]
    participants = Person.objects.filter(
        pk__in=MemoryParticipant.objects.filter(memory_id__in=memory_ids).values("person_id")
    )
    told_by = Memory.objects.filter(pk__in=memory_ids).values("source_person_id")
    sources = Person.objects.filter(pk__in=told_by)
    people = {person.pk: person for person in [*participants, *sources] if not person.is_self}
    return sorted(people.values(), key=lambda person: (person.display_name.lower(), str(person.pk)))
