"""Writes: importing a file in resumable batches, and deleting an account.

Imports go through the project's services (person_create, memory_create), so
every rule that applies to a memory typed in the journal applies to an imported
one: validation, the credential refusal, kind/sensitivity inference, expiry and
the on-commit embedding request. An item a service refuses is skipped and the
reason is reported; it never stops the rest of the import.

Consent (fail closed): people from a Day One file do not exist (Day One has
none). People from a Keepsake export keep the consent status the file gives
them only when the file's consent history for that person is an unbroken chain
of changes ending in that status; their history is restored as it was. Anything
else — a status with no history behind it, a broken chain — imports the person
as `pending`, with an extra consent event saying why, so agents cannot see
their memories until the owner grants consent again. A memory is never
imported without one of its participants: if a person was skipped, so are
their memories.

Who decided (SPEC §4 "Linked people"): every consent decision an import writes is the
importing owner's, never the person's own. A file may say a person decided for
themself (`updated_by` / `actor_kind` = `self`), but a file is anyone's word: written
as `self`, such a decision would be shown to that person, once they link their
account, as theirs. The claim is rewritten to the owner and counted in the job's
report; the history is kept, each event labelled as imported (`imported_at`).

Sharing (SPEC §4): the circles the exporting account owned are recreated as new
circles owned by the importer, with the importer as their only member — other
people's memberships are theirs, not the file's, and the report says who to
invite again; circles owned by others are not recreated. Consent per audience
follows the same rule as for agents, audience by audience: a person's consent
for a recreated circle is restored (for the new circle) only when their history
for that circle ends in it; consents for circles not recreated are not
restored. The history is restored with its audiences (recreated circles' under
their new id), including that of people since deleted. Shares of imported
memories into recreated circles go through memory_share, so the same consent
check applies: a share someone in the memory has not consented to is skipped,
naming them.
"""

from __future__ import annotations

import base64
import logging
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.db import connection, transaction
from django.db.models import F, ProtectedError
from django.utils import timezone

from agents.models import Agent
from attachments.images import image_prepare
from attachments.services import attachments_add
from circles.agent import circle_agent_update
from circles.models import Circle
from circles.services import circle_create, circle_update, memory_share
from linked.services import linked_user_consents_revoke_all, linked_user_link_invites_withdraw
from memories.classify import find_credentials
from memories.models import Memory, MemoryEdge, MemoryGateChange
from memories.services import ParticipantSpec, memory_create
from memories.supersession import memory_supersede
from memories.tasks import embeddings_in_bulk
from people.models import (
    AGENTS_AUDIENCE,
    ConsentActor,
    ConsentEvent,
    ConsentStatus,
    ConsentSurface,
    Person,
    PersonConsent,
    circle_audience,
)
from people.services import person_create, person_update
from portability.models import ImportedItem, ImportJob, ImportOutcome, ImportStatus
from portability.parsing import circle_audience_id, parse_datetime_value, parse_import

logger = logging.getLogger(__name__)

BATCH_SIZE = 100
# The job page shows this many skip reasons; skipped_count keeps the true total.
SKIP_REPORT_LIMIT = 500


# --- starting and resuming ----------------------------------------------------------------


def _enqueue_import(job_id: uuid.UUID | str) -> None:
    # Runs after commit. A broker that is down must not turn a good upload into
    # an error page: memories.tasks.enqueue logs instead of raising, the job
    # stays queued and its page offers to resume it.
    from memories.tasks import enqueue
    from portability.tasks import import_job_run

    if not enqueue(import_job_run, str(job_id)):
        logger.warning("Import job %s is queued but not sent to a worker; it can be resumed.", job_id)


def import_continue_later(*, job_id: uuid.UUID | str) -> None:
    """Queue the next run of a job that used up its time budget."""
    _enqueue_import(job_id)


@transaction.atomic
def import_start(*, owner: AbstractBaseUser, filename: str, content: bytes) -> ImportJob:
    """Validate the whole file, then queue it as a background job.

    Raises ValidationError (and creates nothing) for a malformed file.
    """
    parsed = parse_import(filename=filename, content=content)
    job = ImportJob.objects.create(
        owner=owner,
        format=parsed.format,
        filename=filename[:255],
        payload=parsed.items,
        total=len(parsed.items),
    )
    transaction.on_commit(partial(_enqueue_import, job.id))
    return job


@transaction.atomic
def import_resume(*, job: ImportJob) -> ImportJob:
    """Queue an unfinished job again; it continues after its last committed batch."""
    if job.status == ImportStatus.DONE:
        raise ValidationError("This import has finished; there is nothing to resume.")
    ImportJob.objects.filter(pk=job.pk).exclude(status=ImportStatus.DONE).update(
        status=ImportStatus.QUEUED, error=""
    )
    job.refresh_from_db(fields=["status", "error"])
    transaction.on_commit(partial(_enqueue_import, job.id))
    return job


# --- running ------------------------------------------------------------------------


class ItemSkipped(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _validation_reason(error: ValidationError) -> str:
    if hasattr(error, "error_dict"):
        return " ".join(message for messages in error.message_dict.values() for message in messages)
    return " ".join(error.messages)


@dataclass
class _RunContext:
    owner: AbstractBaseUser
    # Import key ("person:<id in the file>") → id of what it became here (None: skipped).
    refs: dict[str, uuid.UUID | None] = field(default_factory=dict)
    people: dict[uuid.UUID, Person] = field(default_factory=dict)
    # `self` claims the item being imported rewrote; added to the job's count only if
    # the item is imported (a skipped item's savepoint rolls its rows back).
    self_claims_rewritten: int = 0
    imported_at: datetime = field(default_factory=timezone.now)

    def person(self, file_id: str | None, what: str) -> Person | None:
        if file_id is None:
            return None
        new_id = self.refs.get(f"person:{file_id}")
        if new_id is None:
            raise ItemSkipped(
                f"{what} was not imported, so this memory is skipped (it must never reach "
                "agents without that person's consent)."
            )
        if new_id not in self.people:
            self.people[new_id] = Person.objects.get(pk=new_id, owner=self.owner)
        return self.people[new_id]

    def memory_id(self, file_id: str) -> uuid.UUID:
        new_id = self.refs.get(f"memory:{file_id}")
        if new_id is None:
            raise ItemSkipped(f"memory {file_id} was skipped, so this link is too.")
        return new_id


def _audience_here(audience: str, context: _RunContext) -> str | None:
    """The audience in this account: `agents`, or a recreated circle's; None for a
    circle that was not recreated (someone else's, or skipped)."""
    circle_id = circle_audience_id(audience)
    if circle_id is None:
        return audience
    new_id = context.refs.get(f"circle:{circle_id}")
    return None if new_id is None else circle_audience(new_id)


def _decided_by_owner(actor_kind: str, context: _RunContext) -> str:
    """Who decided, as an import writes it: the owner, whatever the file says (counting a `self`)."""
    if actor_kind == ConsentActor.SELF:
        context.self_claims_rewritten += 1
    return ConsentActor.OWNER


def _self_claims_note(name: str, rewritten: int) -> str | None:
    if not rewritten:
        return None
    places = f"{rewritten} place{'s' if rewritten != 1 else ''}"
    return (
        f"{name}: in {places} (a consent or its history) the file says they decided for themselves; "
        "imported as your decision: an import cannot speak for anyone. To decide for themselves, "
        "they link their own account."
    )


def _write_history(*, person: Person | None, events: list[dict[str, Any]], context: _RunContext) -> None:
    for event in events:
        claimed_self = event["actor_kind"] == ConsentActor.SELF
        # The audit trail keeps its original dates, written by the INSERT itself:
        # the history is append-only in the database, so the import's label and the
        # owner as the one who decided go in now or never. A circle that was not
        # recreated keeps its old audience: history, naming no circle here.
        ConsentEvent.objects.create(
            person=person,
            person_name=event["person_name"]
            if person is None
            else (event["person_name"] or person.display_name),
            owner=context.owner,
            audience=_audience_here(event["audience"], context) or event["audience"],
            old_status=event["old_status"],
            new_status=event["new_status"],
            actor=context.owner if event["actor_is_owner"] or claimed_self else None,
            actor_kind=_decided_by_owner(event["actor_kind"], context),
            surface=event["surface"],
            reason=event["reason"],
            created_at=parse_datetime_value(event["created_at"]),
            imported_at=context.imported_at,
        )


def _history_backs(history: list[dict[str, Any]], wanted: str) -> bool:
    """Is `wanted` where an unbroken chain of changes (starting from pending) ends?"""
    chain_ok = all(
        event["old_status"] == (history[index - 1]["new_status"] if index else ConsentStatus.PENDING)
        for index, event in enumerate(history)
    )
    if wanted == ConsentStatus.PENDING:
        return chain_ok and (not history or history[-1]["new_status"] == wanted)
    return chain_ok and bool(history) and history[-1]["new_status"] == wanted


def _reset_to_pending(
    *, person: Person, audience: str, history: list[dict[str, Any]], wanted: str, what: str, context
) -> str:
    last = history[-1]["new_status"] if history else ConsentStatus.PENDING
    reason = (
        f"Imported as pending{what}: the file says “{wanted}” but its consent history does not record "
        "that change. Ask them again and set their consent."
    )
    if last != ConsentStatus.PENDING:
        ConsentEvent.objects.create(
            person=person,
            owner=context.owner,
            audience=audience,
            old_status=last,
            new_status=ConsentStatus.PENDING,
            actor=context.owner,
            surface=ConsentSurface.UI,
            reason=reason,
            imported_at=context.imported_at,
        )
    return f"{person.display_name}: {reason}"


def _restore_consent(*, person: Person, item: dict[str, Any], context: _RunContext) -> str | None:
    """Restore the person's consent history and, audience by audience, the consents
    that history supports.

    Returns a note for the job report when a consent was reset to pending or not restored.
    """
    owner = context.owner
    history = item["consent_events"]
    claims_before = context.self_claims_rewritten
    _write_history(person=person, events=history, context=context)
    if person.is_self:
        # Self's agents consent is the account's own; for circles Self is always granted.
        return None

    def history_for(audience: str) -> list[dict[str, Any]]:
        return [event for event in history if event["audience"] == audience]

    notes = []
    rows = {consent["audience"]: consent for consent in item.get("consents", [])}
    wanted = item["consent_status"]
    agents_history = history_for(AGENTS_AUDIENCE)
    if _history_backs(agents_history, wanted):
        Person.objects.filter(pk=person.pk).update(
            consent_status=wanted, consent_updated_at=parse_datetime_value(item["consent_updated_at"])
        )
        row = rows.get(AGENTS_AUDIENCE)
        if row is not None and row["status"] == wanted:
            # The trigger wrote the status; the reason comes from the file, who decided does not.
            PersonConsent.objects.filter(person=person, audience=AGENTS_AUDIENCE).update(
                reason=row["reason"],
                updated_by=_decided_by_owner(row["updated_by"], context),
                updated_at=parse_datetime_value(row["updated_at"]) or timezone.now(),
            )
    else:
        notes.append(
            _reset_to_pending(
                person=person,
                audience=AGENTS_AUDIENCE,
                history=agents_history,
                wanted=wanted,
                what="",
                context=context,
            )
        )
        Person.objects.filter(pk=person.pk).update(
            consent_status=ConsentStatus.PENDING, consent_updated_at=None
        )

    not_here = 0
    for audience, row in rows.items():
        if audience == AGENTS_AUDIENCE:
            continue
        here = _audience_here(audience, context)
        if here is None:
            not_here += row["status"] != ConsentStatus.PENDING
            continue
        if _history_backs(history_for(audience), row["status"]):
            consent = PersonConsent.objects.create(
                person=person,
                audience=here,
                status=row["status"],
                reason=row["reason"],
                updated_by=_decided_by_owner(row["updated_by"], context),
            )
            if row["updated_at"]:
                PersonConsent.objects.filter(pk=consent.pk).update(
                    updated_at=parse_datetime_value(row["updated_at"])
                )
        else:
            circle = Circle.objects.get(pk=circle_audience_id(here), owner=owner)
            notes.append(
                _reset_to_pending(
                    person=person,
                    audience=here,
                    history=history_for(audience),
                    wanted=row["status"],
                    what=f" for the circle “{circle.name}”",
                    context=context,
                )
            )
    if not_here:
        notes.append(
            f"{person.display_name}: their consent for {not_here} circle{'s' if not_here != 1 else ''} "
            "that you did not own is not restored: those circles are not in this account."
        )
    claims_note = _self_claims_note(person.display_name, context.self_claims_rewritten - claims_before)
    if claims_note:
        notes.append(claims_note)
    return " ".join(notes) or None


def _import_person(item: dict[str, Any], context: _RunContext) -> tuple[uuid.UUID, str | None]:
    owner = context.owner
    details = {key: item[key] for key in ("display_name", "aliases", "kind", "notes")}
    if item["is_self"]:
        # The file's own "Self" is this account's Self: never a second one.
        person = Person.objects.get(owner=owner, is_self=True)
        person_update(person=person, **details)
    else:
        person = person_create(owner=owner, **details)
    note = _restore_consent(person=person, item=item, context=context)
    return person.pk, note


def _import_consent_history(item: dict[str, Any], context: _RunContext) -> tuple[None, None]:
    """The history of people deleted before the export: it outlives them, under their name."""
    _write_history(person=None, events=item["events"], context=context)
    return None, _self_claims_note("People deleted before the export", context.self_claims_rewritten)


def _import_circle(item: dict[str, Any], context: _RunContext) -> tuple[uuid.UUID, str | None]:
    """A circle the exporting account owned, recreated with the importer as its only member."""
    owner = context.owner
    circle = circle_create(owner=owner, name=item["name"], description=item["description"])
    notes = []
    if item["agents_may_read"]:
        circle_update(circle=circle, by=owner, agents_may_read=True)
    if item["agent_role"]:
        try:
            with transaction.atomic():
                circle_agent_update(
                    circle=circle, by=owner, role=item["agent_role"], instructions=item["agent_instructions"]
                )
        except ValidationError as error:
            notes.append(f"its agent keeps the default settings ({_validation_reason(error)})")
    if item["other_members"]:
        notes.append(
            "recreated with you as its only member; its other members "
            f"({', '.join(item['other_members'])}) were not added back: invite them again"
        )
    if not notes:
        return circle.pk, None
    note = "; ".join(notes)
    return circle.pk, f"{note[0].upper()}{note[1:]}."


def _import_share(item: dict[str, Any], context: _RunContext) -> tuple[None, None]:
    memory_id = context.memory_id(item["memory"])
    key = f"circle:{item['circle']}"
    name = item["circle_name"] or "its circle"
    if key not in context.refs:
        raise ItemSkipped(
            f"“{name}” is someone else's circle: only the circles you owned are recreated, "
            "so this share is not restored."
        )
    if context.refs[key] is None:
        raise ItemSkipped(f"the circle “{name}” was not imported, so this share is not restored.")
    # The sharing service's consent check applies: ShareRefused names who has not consented.
    memory_share(
        memory=Memory.objects.get(pk=memory_id, owner=context.owner),
        circle=Circle.objects.get(pk=context.refs[key], owner=context.owner),
        by=context.owner,
    )
    return None, None


def _import_agent(item: dict[str, Any], context: _RunContext) -> tuple[uuid.UUID, str | None]:
    # Built-in agents already exist in every account: the file's copy updates them.
    agent = Agent.objects.filter(owner=context.owner, name=item["name"]).first()
    if agent is None:
        agent = Agent(owner=context.owner, name=item["name"], is_builtin=False)
    agent.role = item["role"]
    agent.instructions = item["instructions"]
    agent.full_clean()
    agent.save()
    return agent.pk, None


def _import_memory(item: dict[str, Any], context: _RunContext) -> tuple[uuid.UUID, str | None]:
    participants = [
        ParticipantSpec(context.person(spec["person"], "A person in it"), spec["role"])
        for spec in item["participants"]
    ]
    memory = memory_create(
        owner=context.owner,
        body=item["body"],
        title=item["title"],
        occurred_at=parse_datetime_value(item["occurred_at"]),
        kind=item["kind"],
        sensitivity=item["sensitivity"],
        source_person=context.person(item["source_person"], "The person who told it"),
        participants=participants,
    )
    photos, left_out = _prepared_photos(item.get("photos") or [])
    attachments_add(
        memory=memory, images=[image for image, _ in photos], captions=[caption for _, caption in photos]
    )
    return memory.pk, ("Photos left out — " + "; ".join(left_out)) if left_out else None


def _import_dayone_entry(item: dict[str, Any], context: _RunContext) -> tuple[uuid.UUID, str | None]:
    # Photos are checked (like any upload) before anything is written for the entry.
    photos, left_out = _prepared_photos(item.get("photos") or [])
    if not item["body"].strip() and not photos:
        raise ItemSkipped(
            "the entry has no text and no photo that could be read (audio and drawings are not imported)."
        )
    memory = memory_create(
        owner=context.owner,
        body=item["body"] if item["body"].strip() else DAYONE_PHOTOS_ONLY,
        title=item["title"],
        occurred_at=parse_datetime_value(item["occurred_at"]),
        kind=item["kind"],
    )
    attachments_add(memory=memory, images=[image for image, _ in photos])
    return memory.pk, ("Photos left out — " + "; ".join(left_out)) if left_out else None


DAYONE_PHOTOS_ONLY = "Photos from Day One."


def _prepared_photos(photos: list[dict[str, str]]) -> tuple[list, list[str]]:
    """An imported entry's photos checked like uploads (with their captions), and why any was left out."""
    prepared, left_out = [], []
    for photo in photos:
        data = base64.b64decode(photo.get("data") or "")
        if not data:
            left_out.append(f"{photo.get('name')}: not in the archive")
            continue
        try:
            image = image_prepare(ContentFile(data), name=photo.get("original_name") or photo.get("name"))
            prepared.append((image, photo.get("caption") or ""))
        except ValidationError as error:
            left_out.append(f"{photo.get('name')}: {' '.join(error.messages)}")
    room = settings.ATTACHMENTS_PER_MEMORY
    if len(prepared) > room:
        left_out.append(f"{len(prepared) - room} photo(s) past the limit of {room} per memory")
        prepared = prepared[:room]
    return prepared, left_out


def _import_supersession(item: dict[str, Any], context: _RunContext) -> tuple[uuid.UUID, str | None]:
    # The supersession service's rules apply (same sensitivity, same sharing scope, no loops).
    older = memory_supersede(
        owner=context.owner,
        older=Memory.objects.get(pk=context.memory_id(item["memory"])),
        newer=Memory.objects.get(pk=context.memory_id(item["superseded_by"])),
    )
    return older.pk, None


def _import_edge(item: dict[str, Any], context: _RunContext) -> tuple[uuid.UUID | None, str | None]:
    MemoryEdge.objects.get_or_create(
        owner=context.owner,
        source_id=context.memory_id(item["source"]),
        target_id=context.memory_id(item["target"]),
        kind=item["kind"],
        defaults={"weight": item["weight"]},
    )
    return None, None


_HANDLERS = {
    "circle": _import_circle,
    "person": _import_person,
    "consent_history": _import_consent_history,
    "agent": _import_agent,
    "memory": _import_memory,
    "dayone": _import_dayone_entry,
    "supersede": _import_supersession,
    "edge": _import_edge,
    "share": _import_share,
}


def _describe(item: dict[str, Any]) -> str:
    if item["type"] == "person":
        return f"Person “{item['display_name']}”"
    if item["type"] in ("memory", "dayone"):
        # Never the body: a memory refused for holding a password must not have
        # it copied into the job report. The title only when it holds no secret.
        source_id = item["key"].split(":", 1)[1]
        label = f"Memory of {(item['occurred_at'] or '')[:10]} ({source_id[:8]}…)"
        if item["title"] and not find_credentials(item["title"]):
            label += f" “{item['title']}”"
        return label
    if item["type"] == "agent":
        return f"Agent “{item['name']}”"
    if item["type"] == "circle":
        return f"Circle “{item['name']}”"
    if item["type"] == "share":
        return f"Share of memory {item['memory'][:8]}… into “{item['circle_name']}”"
    if item["type"] == "consent_history":
        return "Consent history of people deleted before the export"
    return item["key"]


# The batch's memories are embedded in batches on the bulk queue, not one task each.
@embeddings_in_bulk()
def _run_batch(*, job_id: uuid.UUID, items: list[dict[str, Any]], context: _RunContext) -> bool:
    """Process the next batch in one transaction. Returns False when nothing is left.

    The job row is locked for the batch, so two workers handed the same job
    (a redelivered task) take turns; `processed` is committed with the rows the
    batch created, so it is exactly where the next run starts.
    """
    with transaction.atomic():
        job = ImportJob.objects.select_for_update().defer("payload").get(pk=job_id)
        if job.status != ImportStatus.RUNNING:
            return False
        batch = items[job.processed : job.processed + BATCH_SIZE]
        if not batch:
            ImportJob.objects.filter(pk=job_id).update(
                status=ImportStatus.DONE, finished_at=timezone.now(), payload=None
            )
            return False
        if len(context.refs) != job.processed:
            # Another run committed batches since we loaded our references.
            context.refs = dict(job.items.values_list("key", "object_id"))
        records, skipped, notes = [], [], []
        imported = self_claims_rewritten = 0
        for item in batch:
            if item["key"] in context.refs:
                # Already recorded: the counter, not the item, is what went astray.
                continue
            handler = _HANDLERS[item["type"]]
            context.self_claims_rewritten = 0
            try:
                with transaction.atomic():
                    object_id, note = handler(item, context)
            except ItemSkipped as skip:
                reason = skip.reason
            except ValidationError as error:
                reason = _validation_reason(error)
            else:
                imported += 1
                self_claims_rewritten += context.self_claims_rewritten
                context.refs[item["key"]] = object_id
                records.append(
                    ImportedItem(
                        job_id=job_id, key=item["key"], outcome=ImportOutcome.IMPORTED, object_id=object_id
                    )
                )
                if note:
                    notes.append({"item": _describe(item), "reason": note, "skipped": False})
                continue
            context.refs[item["key"]] = None
            records.append(ImportedItem(job_id=job_id, key=item["key"], outcome=ImportOutcome.SKIPPED))
            skipped.append({"item": _describe(item), "reason": reason, "skipped": True})
        ImportedItem.objects.bulk_create(records)
        room = max(0, SKIP_REPORT_LIMIT - len(job.skipped))
        ImportJob.objects.filter(pk=job_id).update(
            processed=F("processed") + len(batch),
            imported=F("imported") + imported,
            skipped_count=F("skipped_count") + len(skipped),
            self_claims_rewritten=F("self_claims_rewritten") + self_claims_rewritten,
            skipped=job.skipped + (notes + skipped)[:room],
        )
    return True


def import_run(
    *, job_id: uuid.UUID | str, time_budget_seconds: float | None = None, max_batches: int | None = None
) -> bool:
    """Run a queued or interrupted job batch by batch; True when work is left for another run.

    Safe to call twice or concurrently: finished batches are never redone. An
    unexpected error rolls back only the current batch, marks the job failed
    (resumable) and is re-raised for the worker's log.
    """
    claimed = ImportJob.objects.filter(
        pk=job_id, status__in=[ImportStatus.QUEUED, ImportStatus.RUNNING]
    ).update(status=ImportStatus.RUNNING)
    if not claimed:
        return False
    job = ImportJob.objects.select_related("owner").get(pk=job_id)
    if job.started_at is None:
        ImportJob.objects.filter(pk=job_id, started_at=None).update(started_at=timezone.now())
    items: list[dict[str, Any]] = job.payload or []
    context = _RunContext(owner=job.owner, refs=dict(job.items.values_list("key", "object_id")))
    started = time.monotonic()
    batches = 0
    try:
        while _run_batch(job_id=job.pk, items=items, context=context):
            batches += 1
            if max_batches is not None and batches >= max_batches:
                return True
            if time_budget_seconds is not None and time.monotonic() - started > time_budget_seconds:
                return True
    except Exception as exc:
        ImportJob.objects.filter(pk=job_id).update(
            status=ImportStatus.FAILED,
            error=f"The import stopped unexpectedly ({type(exc).__name__}). "
            "Everything before this point is saved; resume to continue.",
        )
        raise
    return False


# --- deleting an account --------------------------------------------------------------


@transaction.atomic
def account_delete(*, user: AbstractBaseUser, password: str) -> None:
    """Delete the account and every row it owns, after checking the password.

    Rows owned by the user cascade from the user (people, consent events,
    memories and their participants and edges, agents, tokens, import jobs, …);
    other users' rows that merely mention them (a person linked to this
    account) lose the link. Their sessions go too.
    """
    if not password or not user.check_password(password):
        raise ValidationError({"password": "That is not your password; nothing was deleted."})
    user_id = str(user.pk)
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.get_decoded().get("_auth_user_id") == user_id:
            session.delete()
    # Where others' journals link to this account, nobody can speak for the person
    # any more: every consent they held there becomes revoked (fail closed), in
    # those journals' histories, before the link itself goes with the account.
    linked_user_consents_revoke_all(
        user=user, reason="Their account was deleted: no one can decide for them any more."
    )
    # And no old invitation for those people may let another account link in their place.
    linked_user_link_invites_withdraw(user=user)
    try:
        # Participants PROTECT their person (a person must never silently leave a
        # memory), so the memories, and with them their participants, go first.
        Memory.objects.filter(owner=user).delete()
        # Which transactions changed the gate rows (no foreign key: the triggers write it;
        # deleting the memories just wrote this transaction's own).
        MemoryGateChange.objects.filter(owner=user).delete()
        # The consent history refuses deletes except of the account being erased
        # in this very transaction (migration people 0003).
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('keepsake.erasing_account', %s, true)", [user_id])
        get_user_model().objects.filter(pk=user.pk).delete()
    except ProtectedError as exc:
        raise ValidationError(
            "Your account could not be deleted because other data still depends on it; nothing was deleted."
        ) from exc
