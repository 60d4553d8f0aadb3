"""Reads: the owner's export (JSON and Markdown) and their import jobs.

An export is the owner's view: nothing is consent-gated, everything they
recorded is in it. It is only ever built for the requesting owner.

Sharing (SPEC §4) is in it too: the circles the owner owns with their members
(by username), where each of the owner's memories is shared (circles they do not
own are named, not described), every per-audience consent of the owner's people
and the consent history with its audiences. What belongs to the circle's members
together (a circle's chats) is not the owner's alone, and is left out.
"""

from __future__ import annotations

import io
import json
import uuid
import zipfile
from typing import Any

import yaml
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Prefetch, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from django.utils.text import slugify

from agents.models import Agent
from attachments.models import Attachment
from attachments.storage import attachment_storage
from circles.models import Circle, CircleConversation, CircleMembership, MemoryShare
from memories.models import Memory, MemoryEdge, MemoryGate, MemoryParticipant
from people.models import AGENTS_AUDIENCE, CIRCLE_AUDIENCE_PREFIX, ConsentEvent, Person, PersonConsent
from portability.exporting import RowSerializer, discovered_models, ordering_for, owner_lookup, plain
from portability.models import ImportJob
from portability.parsing import EXPORT_FORMAT_NAME, SCHEMA_VERSION

CORE_MODELS = {
    Person,
    PersonConsent,
    ConsentEvent,
    Memory,
    MemoryParticipant,
    MemoryEdge,
    Agent,
    Circle,
    CircleMembership,
    MemoryShare,
}
# Never exported: derived rows the database keeps itself (the agents' gate hint),
# and a circle's conversations — shared ones belong to all its members, private
# ones to another member — which are not the circle owner's to take away.
NOT_EXPORTED = {MemoryGate, CircleConversation}


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
            ),
            Prefetch(
                "shares", queryset=MemoryShare.objects.select_related("circle").order_by("circle__name")
            ),
        )
        .order_by("occurred_at", "created_at", "id")
    )


def _owned_circles(owner: AbstractBaseUser) -> QuerySet[Circle]:
    return (
        Circle.objects.filter(owner=owner)
        .prefetch_related(
            Prefetch(
                "memberships",
                queryset=CircleMembership.objects.select_related("user").order_by("joined_at", "id"),
            )
        )
        .order_by("created_at", "id")
    )


def _shares(owner: AbstractBaseUser) -> QuerySet[MemoryShare]:
    return (
        MemoryShare.objects.filter(memory__owner=owner)
        .select_related("circle", "circle__owner", "shared_by")
        .order_by("shared_at", "id")
    )


def _person_consents(owner: AbstractBaseUser) -> QuerySet[PersonConsent]:
    return PersonConsent.objects.filter(person__owner=owner).order_by(
        "person__created_at", "person_id", "audience"
    )


def _circle_rows(owner: AbstractBaseUser, rows: RowSerializer) -> list[dict[str, Any]]:
    circles = []
    for circle in _owned_circles(owner):
        row = rows.row(circle)
        row["members"] = [
            rows.row(membership, exclude=("id", "circle")) for membership in circle.memberships.all()
        ]
        circles.append(row)
    return circles


def _share_row(share: MemoryShare) -> dict[str, Any]:
    # Named fields, not the generic row: the share's other columns are the gate's
    # hint (counts and copies kept by triggers), not the owner's data.
    return {
        "memory": str(share.memory_id),
        "circle": str(share.circle_id),
        "circle_name": share.circle.name,
        "circle_owner": share.circle.owner.get_username(),
        "shared_by": share.shared_by.get_username(),
        "shared_at": plain(share.shared_at),
    }


def export_json(*, owner: AbstractBaseUser) -> dict[str, Any]:
    """Everything the owner has, as one JSON-ready document (schema_version 1).

    Ids are the database ids, so they are stable from one export to the next and
    every reference inside the document (participants, edges, consent events,
    per-audience consents, shares) points at an id in it — except a share's
    circle when someone else owns it (named in the share). Consent events keep
    their audience, who decided (actor_kind) and the person's name at the time
    (a deleted person's history has no person id). Token secrets and hashes are
    never included.
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
    for model in discovered_models(handled=CORE_MODELS | NOT_EXPORTED):
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
        "person_consents": [rows.row(consent, exclude=("id",)) for consent in _person_consents(owner)],
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
        "circles": _circle_rows(owner, rows),
        "shares": [_share_row(share) for share in _shares(owner)],
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
        "shared_into": [share.circle.name for share in memory.shares.all()],
    }
    header = yaml.safe_dump(front_matter, sort_keys=False, allow_unicode=True, default_flow_style=False)
    return f"---\n{header}---\n\n{memory.body}\n"


def _one_line(text: str) -> str:
    return " ".join((text or "").split())


def _audience_labels(owner: AbstractBaseUser, audiences: set[str]) -> dict[str, str]:
    """“My agents”, or a circle's name; a circle the owner is no longer in is not named."""
    circle_ids = {
        audience.removeprefix(CIRCLE_AUDIENCE_PREFIX)
        for audience in audiences
        if audience.startswith(CIRCLE_AUDIENCE_PREFIX)
    }
    valid_ids = []
    for circle_id in circle_ids:
        try:
            valid_ids.append(uuid.UUID(circle_id))
        except ValueError:
            continue
    names = {
        str(pk): name
        for pk, name in Circle.objects.filter(pk__in=valid_ids, memberships__user=owner).values_list(
            "pk", "name"
        )
    }
    labels = {AGENTS_AUDIENCE: "My agents"}
    for audience in audiences:
        if audience.startswith(CIRCLE_AUDIENCE_PREFIX):
            name = names.get(audience.removeprefix(CIRCLE_AUDIENCE_PREFIX))
            labels[audience] = f"the circle “{name}”" if name else "a circle you are no longer in"
    return labels


def _event_line(event: ConsentEvent, labels: dict[str, str]) -> str:
    who = "they decided" if event.actor_kind == "self" else "you decided"
    imported = ", imported" if event.imported_at else ""
    line = (
        f"- {event.created_at:%Y-%m-%d %H:%M} — {labels.get(event.audience, event.audience)}: "
        f"{event.old_status} → {event.new_status} ({who}, {event.get_surface_display()}{imported})"
    )
    reason = _one_line(event.reason)
    return f"{line}: {reason}" if reason else line


def people_markdown(*, owner: AbstractBaseUser) -> str:
    """Every person with their consent per audience and its history (the history of
    people since deleted too, under the name they had)."""
    consents: dict[Any, list[PersonConsent]] = {}
    for consent in _person_consents(owner):
        consents.setdefault(consent.person_id, []).append(consent)
    events = list(ConsentEvent.objects.filter(owner=owner).order_by("created_at", "id"))
    labels = _audience_labels(
        owner,
        {event.audience for event in events} | {c.audience for rows in consents.values() for c in rows},
    )
    history: dict[Any, list[ConsentEvent]] = {}
    for event in events:
        history.setdefault(event.person_id, []).append(event)
    lines = ["# People", ""]
    for person in (
        Person.objects.filter(owner=owner).select_related("linked_user").order_by("created_at", "id")
    ):
        lines += [f"## {_one_line(person.display_name)}" + (" (you)" if person.is_self else ""), ""]
        if person.aliases:
            lines.append(f"Also called: {', '.join(_one_line(alias) for alias in person.aliases)}")
        lines.append(f"Kind: {person.get_kind_display().lower()}")
        if person.linked_user is not None and not person.is_self:
            lines.append(f"Linked to the account: {person.linked_user.get_username()}")
        lines += ["", "Consent:"]
        for consent in sorted(consents.get(person.pk, []), key=lambda row: row.audience != AGENTS_AUDIENCE):
            line = f"- {labels[consent.audience]}: {consent.status}"
            if consent.reason:
                line += f" — {_one_line(consent.reason)}"
            lines.append(line + f" ({'they' if consent.updated_by == 'self' else 'you'} decided)")
        if person.is_self:
            lines.append("- every circle you share into: granted (sharing your own memory is your consent)")
        if history.get(person.pk):
            lines += ["", "History:", *(_event_line(event, labels) for event in history[person.pk])]
        lines.append("")
    deleted = history.get(None, [])
    if deleted:
        lines += ["## People no longer in the journal", ""]
        lines += [f"{_event_line(event, labels)} — {_one_line(event.person_name)}" for event in deleted]
        lines.append("")
    return "\n".join(lines)


def circles_markdown(*, owner: AbstractBaseUser, files: dict[Any, str]) -> str:
    """The owner's circles with their members, and where each memory is shared.

    `files`: memory id → its file name in the archive.
    """
    shares: dict[Any, list[MemoryShare]] = {}
    for share in _shares(owner).select_related("memory"):
        shares.setdefault(share.circle_id, []).append(share)

    def shared_lines(circle_id) -> list[str]:
        return [
            f"- {share.memory.occurred_at:%Y-%m-%d} {_one_line(share.memory.headline)} "
            f"(keepsake-memories/{files.get(share.memory_id, '')})"
            for share in shares.get(circle_id, [])
        ]

    lines = ["# Circles", ""]
    owned = list(_owned_circles(owner))
    if not owned:
        lines += ["You own no circle.", ""]
    for circle in owned:
        lines += [f"## {_one_line(circle.name)}", ""]
        if circle.description:
            lines += [circle.description.strip(), ""]
        members = ", ".join(
            f"{membership.user.get_username()} ({membership.get_role_display().lower()})"
            for membership in circle.memberships.all()
        )
        lines += [f"Members: {members}", "", "Your memories shared here:"]
        lines += shared_lines(circle.pk) or ["- none"]
        lines.append("")
    others = sorted(
        {share.circle for rows in shares.values() for share in rows if share.circle.owner_id != owner.pk},
        key=lambda circle: (circle.name, str(circle.pk)),
    )
    if others:
        lines += ["## Shared into other people's circles", ""]
        for circle in others:
            lines += [f"### {_one_line(circle.name)} (owned by {circle.owner.get_username()})", ""]
            lines += [*shared_lines(circle.pk), ""]
    return "\n".join(lines)


def _photo_markdown(photos: list[Attachment]) -> str:
    return "".join(
        f"\n![{photo.caption.replace(']', ')')}](photos/{_photo_file(photo)})\n" for photo in photos
    )


def _photo_file(photo: Attachment) -> str:
    return f"{photo.pk}.{photo.original.rsplit('.', 1)[-1]}"


def export_markdown_zip(*, owner: AbstractBaseUser) -> bytes:
    """A ZIP with one Markdown file per memory, under `keepsake-memories/`, its photos (the
    originals, as uploaded) in `keepsake-memories/photos/`, `keepsake-people.md` (consent per
    audience and its history) and `keepsake-circles.md` (circles, members, shares) beside
    them, and `keepsake-export.json` (export_json): this ZIP imports back, photos and all."""
    buffer = io.BytesIO()
    taken: set[str] = set()
    files: dict[Any, str] = {}
    photos: dict[Any, list[Attachment]] = {}
    for photo in Attachment.objects.filter(owner=owner).order_by("memory_id", "position", "created_at"):
        photos.setdefault(photo.memory_id, []).append(photo)
    storage = attachment_storage()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for memory in _memories_with_people(owner).iterator(chunk_size=500):
            files[memory.pk] = _markdown_name(memory, taken)
            text = memory_markdown(memory) + _photo_markdown(photos.get(memory.pk, []))
            archive.writestr(f"keepsake-memories/{files[memory.pk]}", text)
            for photo in photos.get(memory.pk, []):
                with storage.open(photo.original, "rb") as original:
                    archive.writestr(f"keepsake-memories/photos/{_photo_file(photo)}", original.read())
        archive.writestr("keepsake-people.md", people_markdown(owner=owner))
        archive.writestr("keepsake-circles.md", circles_markdown(owner=owner, files=files))
        archive.writestr("keepsake-export.json", json.dumps(export_json(owner=owner), ensure_ascii=False))
    return buffer.getvalue()


def export_filename(*, owner: AbstractBaseUser, extension: str) -> str:
    username = slugify(owner.get_username()) or "account"
    return f"keepsake-{username}-{timezone.now():%Y-%m-%d}.{extension}"


def import_job_list(*, owner: AbstractBaseUser) -> QuerySet[ImportJob]:
    return ImportJob.objects.filter(owner=owner).defer("payload").order_by("-created_at")


def import_job_get(*, owner: AbstractBaseUser, job_id: object) -> ImportJob:
    """The owner's import job, or 404 — someone else's job does not exist for you."""
    return get_object_or_404(ImportJob.objects.defer("payload"), owner=owner, pk=job_id)
