"""Reads: the owner's export (JSON and Markdown) and their import jobs.

An export is the owner's view: nothing is consent-gated, everything they
recorded is in it. It is only ever built for the requesting owner.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import yaml
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.text import slugify

from agents.models import Agent
from memories.models import Memory, MemoryEdge, MemoryParticipant
from people.models import ConsentEvent, Person
from portability.exporting import RowSerializer, discovered_models, ordering_for, owner_lookup, plain
from portability.models import ImportJob
from portability.parsing import EXPORT_FORMAT_NAME, SCHEMA_VERSION

CORE_MODELS = {Person, ConsentEvent, Memory, MemoryParticipant, MemoryEdge, Agent}


def _memories_with_people(owner: AbstractBaseUser) -> QuerySet[Memory]:
    return (
        Memory.objects.filter(owner=owner)
        .defer("embedding")
        .select_related("source_person")
        .prefetch_related(
            Prefetch(
                "participants",
                queryset=MemoryParticipant.objects.select_related("person").order_by(
                    "person__display_name", "person_id"
                ),
            )
        )
        .order_by("occurred_at", "created_at", "id")
    )


def export_json(*, owner: AbstractBaseUser) -> dict[str, Any]:
    """Everything the owner has, as one JSON-ready document (schema_version 1).

    Ids are the database ids, so they are stable from one export to the next and
    every reference inside the document (participants, edges, consent events)
    points at an id in it. Token secrets and hashes are never included.
    """
    rows = RowSerializer()
    memories = []
    for memory in _memories_with_people(owner):
        row = rows.row(memory)
        row["participants"] = [
            {"person": str(participant.person_id), "role": participant.role}
            for participant in memory.participants.all()
        ]
        memories.append(row)

    records: dict[str, list[dict[str, Any]]] = {}
    for model in discovered_models(handled=CORE_MODELS):
        queryset = model._default_manager.filter(**{owner_lookup(model): owner}).order_by(
            *ordering_for(model)
        )
        records[model._meta.label_lower] = [rows.row(obj) for obj in queryset]

    return {
        "format": EXPORT_FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "exported_at": timezone.now().isoformat(),
        "account": {
            "username": owner.get_username(),
            "email": getattr(owner, "email", ""),
            "date_joined": plain(getattr(owner, "date_joined", None)),
        },
        "people": [
            rows.row(person) for person in Person.objects.filter(owner=owner).order_by("created_at", "id")
        ],
        "consent_events": [
            rows.row(event) for event in ConsentEvent.objects.filter(owner=owner).order_by("created_at", "id")
        ],
        "memories": memories,
        "edges": [
            rows.row(edge)
            for edge in MemoryEdge.objects.filter(owner=owner).order_by("source_id", "target_id", "kind")
        ],
        "agents": [
            rows.row(agent) for agent in Agent.objects.filter(owner=owner).order_by("created_at", "id")
        ],
        # Conversations, access log, token metadata and anything added later:
        # every other model whose rows belong to the owner, by model label.
        "records": records,
    }


def _markdown_name(memory: Memory, taken: set[str]) -> str:
    slug = slugify(memory.headline)[:60].strip("-") or "memory"
    name = f"{memory.occurred_at:%Y-%m-%d}-{slug}-{memory.id.hex[:8]}.md"
    if name in taken:
        # Two memories sharing a date, slug and id prefix: the full id settles it.
        name = f"{memory.occurred_at:%Y-%m-%d}-{slug}-{memory.id.hex}.md"
    taken.add(name)
    return name


def memory_markdown(memory: Memory) -> str:
    """One memory as Markdown with YAML front matter."""
    front_matter = {
        "id": str(memory.id),
        "date": memory.occurred_at.isoformat(),
        "title": memory.title,
        "kind": memory.kind,
        "sensitivity": memory.sensitivity,
        "people": [
            {"name": participant.person.display_name, "role": participant.role}
            for participant in memory.participants.all()
        ],
        "told_by": memory.source_person.display_name if memory.source_person else None,
        "expires_at": plain(memory.expires_at),
        "superseded_by": plain(memory.superseded_by_id),
    }
    header = yaml.safe_dump(front_matter, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{header}---\n\n{memory.body}\n"


def export_markdown_zip(*, owner: AbstractBaseUser) -> bytes:
    """A ZIP with one Markdown file per memory, under `keepsake-memories/`."""
    buffer = io.BytesIO()
    taken: set[str] = set()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for memory in _memories_with_people(owner).iterator(chunk_size=500):
            archive.writestr(f"keepsake-memories/{_markdown_name(memory, taken)}", memory_markdown(memory))
    return buffer.getvalue()


def export_filename(*, owner: AbstractBaseUser, extension: str) -> str:
    username = slugify(owner.get_username()) or "account"
    return f"keepsake-{username}-{timezone.now():%Y-%m-%d}.{extension}"


def import_job_list(*, owner: AbstractBaseUser) -> QuerySet[ImportJob]:
    return ImportJob.objects.filter(owner=owner).defer("payload").order_by("-created_at")


def import_job_get(*, owner: AbstractBaseUser, job_id: object) -> ImportJob:
    """The owner's import job, or 404 — someone else's job does not exist for you."""
    return get_object_or_404(ImportJob.objects.defer("payload"), owner=owner, pk=job_id)
