"""The Universe: the owner's memories and people as one graph, from the edges the workers computed.

Owner only. Nodes are the owner's memories (newest first, capped) and the people in
them; links are the stored MemoryEdge rows between memories on the graph (similar,
supersedes) and each memory's participants. Which memories agents may not see is
asked of THE gate (agent_visible_memories), never worked out here, and only marks
them: the owner sees everything.

The cap keeps the page responsive on a large journal: a graph of a few hundred nodes
draws in a moment, and the page says how many more there are and how to narrow
down (a person, a time span).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from attachments.selectors import first_photo_thumbnails
from memories.gate import agent_visible_memories
from memories.models import EdgeKind, Memory, MemoryEdge, MemoryParticipant
from people.models import Person

DEFAULT_LIMIT = 300
MAX_LIMIT = 1500
# Drawn between memories. Shared-person edges are left out: the person nodes show them.
EDGE_KINDS = (EdgeKind.SIMILAR, EdgeKind.SUPERSEDES)


@dataclass(frozen=True)
class UniverseFilter:
    person: Person | None = None
    since: datetime.date | None = None
    until: datetime.date | None = None
    limit: int = DEFAULT_LIMIT


def _day_start(day: datetime.date) -> datetime.datetime:
    return timezone.make_aware(datetime.datetime.combine(day, datetime.time.min))


def universe_graph(*, owner: AbstractBaseUser, universe_filter: UniverseFilter) -> dict:
    """Nodes and links for the owner's graph, plus how many memories matched and how many are drawn."""
    memories = Memory.objects.filter(owner=owner)
    if universe_filter.person is not None:
        person_id = universe_filter.person.pk
        memories = memories.filter(Q(participants__person_id=person_id) | Q(source_person_id=person_id))
    if universe_filter.since is not None:
        memories = memories.filter(occurred_at__gte=_day_start(universe_filter.since))
    if universe_filter.until is not None:
        day_after = universe_filter.until + datetime.timedelta(days=1)
        memories = memories.filter(occurred_at__lt=_day_start(day_after))
    memories = memories.distinct()
    total = memories.count()
    shown = list(
        memories.order_by("-occurred_at", "-created_at").only("id", "title", "body", "occurred_at", "kind")[
            : universe_filter.limit
        ]
    )
    ids = [memory.pk for memory in shown]
    visible = set(agent_visible_memories(owner).filter(pk__in=ids).values_list("pk", flat=True))
    thumbnails = first_photo_thumbnails(memory_ids=ids)

    nodes: list[dict] = []
    for memory in shown:
        nodes.append(
            {
                "id": f"m-{memory.pk}",
                "type": "memory",
                "label": memory.headline[:60],
                "date": timezone.localtime(memory.occurred_at).date().isoformat(),
                "kind": memory.kind,
                "gated": memory.pk not in visible,
                "url": reverse("memory_detail", args=[memory.pk]),
                **({"thumbnail": thumbnails[memory.pk]} if memory.pk in thumbnails else {}),
            }
        )

    participations = list(
        MemoryParticipant.objects.filter(memory_id__in=ids, person__is_self=False).values_list(
            "memory_id", "person_id"
        )
    )
    person_ids = {person_id for _, person_id in participations}
    people = Person.objects.filter(owner=owner, pk__in=person_ids).only("id", "display_name")
    counts: dict[object, int] = {}
    for _, person_id in participations:
        counts[person_id] = counts.get(person_id, 0) + 1
    for person in people:
        nodes.append(
            {
                "id": f"p-{person.pk}",
                "type": "person",
                "label": person.display_name,
                "count": counts.get(person.pk, 0),
                "url": reverse("person_detail", args=[person.pk]),
            }
        )

    links = [
        {"source": f"p-{person_id}", "target": f"m-{memory_id}", "kind": "person"}
        for memory_id, person_id in participations
    ]
    edges = MemoryEdge.objects.filter(
        owner=owner, kind__in=EDGE_KINDS, source_id__in=ids, target_id__in=ids
    ).values_list("source_id", "target_id", "kind")
    seen: set[tuple] = set()
    for source_id, target_id, kind in edges:
        pair = (min(str(source_id), str(target_id)), max(str(source_id), str(target_id)), kind)
        if pair in seen:
            continue  # similar edges are stored both ways
        seen.add(pair)
        links.append({"source": f"m-{source_id}", "target": f"m-{target_id}", "kind": kind})

    return {
        "total": total,
        "shown": len(shown),
        "limit": universe_filter.limit,
        "gated": sum(1 for node in nodes if node.get("gated")),
        "nodes": nodes,
        "links": links,
    }


def universe_people(*, owner: AbstractBaseUser) -> list[Person]:
    """The people to filter by: the owner's, by name (not Self: every memory of theirs is theirs)."""
    return list(Person.objects.filter(owner=owner, is_self=False).order_by("display_name", "pk"))
