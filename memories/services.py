from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TypedDict, Unpack

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Min, Q, Subquery
from django.utils import timezone

from config.db_retry import retry_on_conflict
from config.limits import MEMORY_BODY_MAX_LENGTH, TOO_FAR_IN_THE_FUTURE, date_too_far
from memories.kind_inference import memory_request_kind_inference
from memories.lifecycle import memory_apply_expiry, memory_resolve_kind_and_sensitivity
from memories.models import (
    EdgeKind,
    Memory,
    MemoryEdge,
    MemoryKind,
    MemoryParticipant,
    ParticipantRole,
    Sensitivity,
)
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


def _resolve_and_validate_fields(
    *,
    owner: AbstractBaseUser,
    title: str,
    body: str,
    kind: str | None,
    sensitivity: str | None,
    source_person: Person | None,
    occurred_at: datetime | None,
) -> tuple[str, str]:
    """The kind and sensitivity to save (inferred where None), once every field is valid."""
    kind, sensitivity = memory_resolve_kind_and_sensitivity(
        title=title, body=body, kind=kind, sensitivity=sensitivity
    )
    errors: dict[str, str] = {}
    if date_too_far(occurred_at):
        # Checked before memory_apply_expiry, whose date arithmetic would overflow.
        errors["occurred_at"] = TOO_FAR_IN_THE_FUTURE
    if not body.strip():
        errors["body"] = "Write something: a memory needs a body."
    elif len(body) > MEMORY_BODY_MAX_LENGTH:
        errors["body"] = f"A memory's text can be at most {MEMORY_BODY_MAX_LENGTH} characters."
    if kind not in MemoryKind.values:
        errors["kind"] = f"Unknown kind “{kind}”."
    if sensitivity not in Sensitivity.values:
        errors["sensitivity"] = f"Unknown sensitivity “{sensitivity}”."
    if source_person is not None and source_person.owner_id != owner.pk:
        errors["source_person"] = "Unknown person."
    if errors:
        raise ValidationError(errors)
    return kind, sensitivity


@retry_on_conflict
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
    text holding a secret is refused before anything is written. An inferred kind
    may later be refined by the LLM (memories/kind_inference.py).
    """
    kind_inferred = not kind
    kind, sensitivity = _resolve_and_validate_fields(
        owner=owner,
        title=title,
        body=body,
        kind=kind,
        sensitivity=sensitivity,
        source_person=source_person,
        occurred_at=occurred_at,
    )
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
    _request_refresh(memory_id=memory.pk, text_changed=True)
    if kind_inferred:
        memory_request_kind_inference(memory=memory)
    return memory


# Written by the workers; memory_update must not write back a stale copy of them.
WORKER_FIELDS = ("embedding", "embedding_model", "embedded_at", "embedding_claimed_at", "edges_computed_at")


@retry_on_conflict
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
    """Edit a memory; when `participants` is given it replaces the whole set.

    A kind left as None is inferred again (and may be refined by the LLM, as on create).
    """
    owner = memory.owner
    kind_inferred = not kind
    kind, sensitivity = _resolve_and_validate_fields(
        owner=owner,
        title=title,
        body=body,
        kind=kind,
        sensitivity=sensitivity,
        source_person=source_person,
        occurred_at=occurred_at,
    )
    specs = None if participants is None else _validate_participants(owner=owner, participants=participants)
    # Lock the row and take the workers' fields from it, not from `memory`,
    # which may have been loaded before a worker stored a vector.
    current = (
        Memory.objects.select_for_update().filter(pk=memory.pk).values("title", "body", *WORKER_FIELDS).get()
    )
    for field in WORKER_FIELDS:
        setattr(memory, field, current[field])
    memory.body = body.strip()
    memory.title = title.strip()
    if occurred_at is not None:
        memory.occurred_at = occurred_at
    memory.kind = kind
    memory.sensitivity = sensitivity
    memory.source_person = source_person
    memory_apply_expiry(memory=memory)
    text_changed = (current["title"], current["body"]) != (memory.title, memory.body)
    if text_changed:
        # The old vector describes the old text: drop it (full-text search still
        # finds the memory) and release any claim so the new task can take it.
        memory.embedding = None
        memory.embedding_model = ""
        memory.embedded_at = None
        memory.embedding_claimed_at = None
    if text_changed or specs is not None:
        memory.edges_computed_at = None
    memory.save()
    if specs is not None:
        MemoryParticipant.objects.filter(memory=memory).delete()
        MemoryParticipant.objects.bulk_create(
            MemoryParticipant(memory=memory, person=spec.person, role=spec.role) for spec in specs
        )
    if text_changed or specs is not None:
        _request_refresh(memory_id=memory.pk, text_changed=text_changed)
    if kind_inferred:
        memory_request_kind_inference(memory=memory)
    return memory


@retry_on_conflict
@transaction.atomic
def memory_delete(*, memory: Memory) -> None:
    # The row first, then what references it: a worker about to point an edge at this
    # memory (memories_lock_for_reference) now waits for the deletion and skips it.
    # Collecting the references before holding the row let the worker delete and
    # rewrite the same edges meanwhile, each side waiting on the other (a deadlock).
    Memory.objects.select_for_update().filter(pk=memory.pk).values_list("pk", flat=True).first()
    memory.delete()


class _MemoryRequiredFields(TypedDict):
    body: str


class MemoryFields(_MemoryRequiredFields, total=False):
    """The fields memory_create and memory_update take beside the memory (or owner) and participants."""

    title: str
    occurred_at: datetime | None
    kind: str | None
    sensitivity: str | None
    source_person: Person | None


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


@retry_on_conflict
@transaction.atomic
def memory_create_with_new_people(
    *,
    owner: AbstractBaseUser,
    participants: Iterable[ParticipantSpec] = (),
    new_people: Iterable[NewPersonSpec] = (),
    **fields: Unpack[MemoryFields],
) -> Memory:
    """memory_create, also creating people typed in by name.

    One transaction: if the memory is refused, the new people are not kept.
    """
    specs = [*participants, *_create_new_people(owner=owner, new_people=new_people)]
    return memory_create(owner=owner, participants=specs, **fields)


@retry_on_conflict
@transaction.atomic
def memory_update_with_new_people(
    *,
    memory: Memory,
    participants: Iterable[ParticipantSpec] = (),
    new_people: Iterable[NewPersonSpec] = (),
    **fields: Unpack[MemoryFields],
) -> Memory:
    """memory_update replacing the participants, also creating people typed in by name (atomic)."""
    specs = [*participants, *_create_new_people(owner=memory.owner, new_people=new_people)]
    return memory_update(memory=memory, participants=specs, **fields)


# --- Derived data: embeddings and edges (run by memories/tasks.py) ----------
#
# A memory's embedding and edges are computed by Celery workers after the save
# commits. The services below are what the tasks call; they take ids, load fresh
# state and are idempotent, so a redelivered, duplicated or concurrent task
# leaves the same rows.

# Edges the workers own; `supersedes` edges are written by the lifecycle code.
COMPUTED_EDGE_KINDS = (EdgeKind.SIMILAR, EdgeKind.SHARED_PERSON)


def _request_refresh(*, memory_id: uuid.UUID, text_changed: bool) -> None:
    """After commit, ask the workers to recompute this memory's embedding and/or edges.

    After commit, so a worker never looks for a row that is not there yet. The
    publish never raises (memories.tasks.enqueue logs instead): a down broker
    must not fail a save. The beat sweep finds whatever this misses, because the
    row itself records what is stale (embedded_at / edges_computed_at NULL).
    """
    from memories import tasks

    if text_changed:
        publish = partial(tasks.enqueue, tasks.refresh_memories, [str(memory_id)])
    else:
        publish = partial(tasks.enqueue, tasks.compute_edges, [str(memory_id)], True)
    transaction.on_commit(publish, robust=True)


def _embedding_input(*, title: str, body: str) -> str:
    return f"{title}\n\n{body}" if title else body


def memory_embed_batch(*, memory_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Compute and store the embeddings of those memories that still need one.

    Returns the ids whose vectors this call stored. Work is claimed first with a
    conditional update (skipping rows another transaction holds), so two workers
    given the same ids never both encode them; a claim left by a worker that died
    becomes reclaimable after MEMORY_EMBEDDING_CLAIM_TIMEOUT seconds. The texts are
    encoded in one embed_texts call (batched inside), not one by one.
    """
    from memories.embeddings import MODEL_NAME, embed_texts

    claimed_at = timezone.now()
    stale_before = claimed_at - timedelta(seconds=settings.MEMORY_EMBEDDING_CLAIM_TIMEOUT)
    with transaction.atomic():
        claimable = (
            Memory.objects.filter(id__in=list(memory_ids), embedded_at__isnull=True)
            .filter(Q(embedding_claimed_at__isnull=True) | Q(embedding_claimed_at__lt=stale_before))
            .select_for_update(skip_locked=True)
            .order_by("id")
        )
        claimed = list(claimable.values_list("id", "title", "body"))
        Memory.objects.filter(id__in=[memory_id for memory_id, _, _ in claimed]).update(
            embedding_claimed_at=claimed_at
        )
    if not claimed:
        return []
    try:
        vectors = embed_texts([_embedding_input(title=title, body=body) for _, title, body in claimed])
    except BaseException:
        # Give the work back at once (soft time limit, model error) rather than
        # making the next attempt wait for the claim to go stale.
        Memory.objects.filter(
            id__in=[memory_id for memory_id, _, _ in claimed], embedding_claimed_at=claimed_at
        ).update(embedding_claimed_at=None)
        raise
    return _memory_embeddings_store(
        claimed=claimed, vectors=vectors, model_name=MODEL_NAME, embedded_at=claimed_at
    )


def _memory_embeddings_store(
    *, claimed: list[tuple[uuid.UUID, str, str]], vectors, model_name: str, embedded_at: datetime
) -> list[uuid.UUID]:
    # One set-based UPDATE for the whole batch (one round trip and one plan, not
    # one ORM update per row). Each row only if its text is still the text we
    # encoded: an edit made while we were encoding wins, and its own task stores
    # the newer vector. Returns the ids written, in claim order.
    table = Memory._meta.db_table
    as_vector = Memory._meta.get_field("embedding").get_prep_value
    with transaction.atomic(), connection.cursor() as cursor:
        memories_lock_for_update(memory_id for memory_id, _, _ in claimed)
        cursor.execute(
            f"""
            UPDATE {table} AS memory
               SET embedding = encoded.embedding::vector,
                   embedding_model = %s,
                   embedded_at = %s,
                   embedding_claimed_at = NULL
              FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[])
                   AS encoded(id, title, body, embedding)
             WHERE memory.id = encoded.id
               AND memory.title = encoded.title
               AND memory.body = encoded.body
               AND memory.embedded_at IS NULL
         RETURNING memory.id
            """,
            [
                model_name,
                embedded_at,
                [memory_id for memory_id, _, _ in claimed],
                [title for _, title, _ in claimed],
                [body for _, _, body in claimed],
                [as_vector(vector) for vector in vectors],
            ],
        )
        written = {row[0] for row in cursor.fetchall()}
    return [memory_id for memory_id, _, _ in claimed if memory_id in written]


# How many of a memory's nearest are checked for whether it now belongs in their own
# `similar` lists (see _similar_targets): exact for journals this small, and nearly so beyond.
SIMILAR_REVERSE_CANDIDATES = 50


def _similar_targets(
    *, memory_id: uuid.UUID, owner_id: int, embedding
) -> tuple[list[tuple[uuid.UUID, float]], set[uuid.UUID]]:
    """(this memory's `similar` targets, the memories whose own lists it now belongs in).

    The owner's own (ungated) neighbours, through the one vector-search path: it
    searches exactly for small journals and iteratively over HNSW for large ones,
    so dead index entries or other owners' rows cannot starve the list.

    Nearest neighbours are not symmetric: this memory may enter the top list of a
    memory X that is not in its own. Among its nearest SIMILAR_REVERSE_CANDIDATES,
    those X whose list is short, or whose weakest `similar` edge is weaker than
    their similarity to this memory, have a stale list now.
    """
    from memories.retrieval import memory_similar

    limit = settings.MEMORY_EDGES_SIMILAR_LIMIT
    minimum = settings.MEMORY_EDGES_SIMILAR_MIN_SIMILARITY
    hits = memory_similar(
        Memory(pk=memory_id, owner_id=owner_id),
        respect_consent=False,
        limit=max(limit, SIMILAR_REVERSE_CANDIDATES),
    )
    near = [
        (hit.memory.pk, hit.similarity)
        for hit in hits
        if hit.similarity is not None and hit.similarity >= minimum
    ]
    lists = {
        row["source_id"]: (row["count"], row["weakest"])
        for row in MemoryEdge.objects.filter(source_id__in=[pk for pk, _ in near], kind=EdgeKind.SIMILAR)
        .values("source_id")
        .annotate(count=Count("id"), weakest=Min("weight"))
    }
    stale = {
        pk for pk, similarity in near if pk not in lists or lists[pk][0] < limit or similarity > lists[pk][1]
    }
    return near[:limit], stale


def _shared_person_targets(*, memory_id: uuid.UUID, owner_id: int) -> list[tuple[uuid.UUID, float]]:
    # The owner's Self person would link every memory to every other: not a signal.
    people = MemoryParticipant.objects.filter(memory_id=memory_id, person__is_self=False).values("person_id")
    rows = (
        MemoryParticipant.objects.filter(person_id__in=Subquery(people), memory__owner_id=owner_id)
        .exclude(memory_id=memory_id)
        .values("memory_id")
        .annotate(shared=Count("person_id"))
        .order_by("-shared", "-memory__occurred_at", "memory_id")[: settings.MEMORY_EDGES_SHARED_PERSON_LIMIT]
    )
    return [(row["memory_id"], float(row["shared"])) for row in rows]


def memories_lock_for_reference(memory_ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
    """Lock these memories FOR KEY SHARE until the transaction ends; returns the ones that exist.

    For a worker about to write rows that point at memories (edges, supersession
    proposals). Without it, a memory deleted meanwhile made the worker's COMMIT fail
    on the foreign key, or (if the worker committed first) left the deletion with a
    reference it had not seen. The lock conflicts only with deleting the row (or
    changing its key): edits and other workers go on. A deletion that holds the row
    makes this wait until it commits, and the row is then not returned: skip it. A
    deletion that comes after waits for this transaction, and the database's ON
    DELETE CASCADE (migration 0017) removes what this wrote. Locked in id order.
    """
    ids = sorted(set(memory_ids))
    if not ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Memory._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE",
            [ids],
        )
        return {row[0] for row in cursor.fetchall()}


def memories_lock_for_update(memory_ids: Iterable[uuid.UUID]) -> None:
    """Lock these memories FOR NO KEY UPDATE, in id order, until the transaction ends.

    Taken before every update of several memories' rows at once (a worker's batch):
    a multi-row UPDATE locks its rows in whatever order it reads them, so two of them
    over overlapping memories (edges stamped while embeddings are stored) could each
    wait for a row the other holds, a deadlock. In one order, one simply waits.
    """
    ids = sorted(set(memory_ids))
    if ids:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id FROM {Memory._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE",
                [ids],
            )


def memory_edges_refresh(*, memory_id: uuid.UUID) -> set[uuid.UUID]:
    """Replace this memory's computed edges (atomically) from its current state.

    Edges are directed and owned by their source: the `similar` and
    `shared_person` edges with source = this memory are its own top-few lists
    (similar: nearest by cosine with similarity >= MEMORY_EDGES_SIMILAR_MIN_SIMILARITY;
    shared_person: most people in common, the owner's Self person not counted).
    Recomputing replaces exactly those rows, so running it twice, or twice at once
    (serialised by an advisory lock), leaves the same rows.

    Returns the neighbours whose own lists may now be stale: those that pointed
    here, those this memory now points to (similarity and sharing a person are
    symmetric, so this memory may belong in their lists), and the near ones whose
    similar lists it now enters without their being in its own (_similar_targets).
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"edges:{memory_id}"])
        memory = Memory.objects.filter(id=memory_id).values("owner_id", "embedding").first()
        if memory is None:
            return set()  # deleted since the task was queued; its edges went with it
        targets: list[tuple[str, uuid.UUID, float]] = []
        entered: set[uuid.UUID] = set()
        if memory["embedding"] is not None:
            similar, entered = _similar_targets(
                memory_id=memory_id, owner_id=memory["owner_id"], embedding=memory["embedding"]
            )
            targets += [(EdgeKind.SIMILAR, target_id, weight) for target_id, weight in similar]
        targets += [
            (EdgeKind.SHARED_PERSON, target_id, weight)
            for target_id, weight in _shared_person_targets(memory_id=memory_id, owner_id=memory["owner_id"])
        ]
        # The memory and its targets must still exist when the edges are written (a
        # deletion may be running now): locked here, the gone ones left out.
        present = memories_lock_for_reference([memory_id, *(target_id for _, target_id, _ in targets)])
        if memory_id not in present:
            return set()
        targets = [target for target in targets if target[1] in present]
        pointing_here = set(
            MemoryEdge.objects.filter(target_id=memory_id, kind__in=COMPUTED_EDGE_KINDS).values_list(
                "source_id", flat=True
            )
        )
        MemoryEdge.objects.filter(source_id=memory_id, kind__in=COMPUTED_EDGE_KINDS).delete()
        MemoryEdge.objects.bulk_create(
            MemoryEdge(
                owner_id=memory["owner_id"],
                source_id=memory_id,
                target_id=target_id,
                kind=kind,
                weight=weight,
            )
            for kind, target_id, weight in targets
        )
        Memory.objects.filter(id=memory_id).update(edges_computed_at=timezone.now())
    return (pointing_here | entered | {target_id for _, target_id, _ in targets}) - {memory_id}


# --- Edges for a batch of memories, in a few set-based statements -----------------------

# The most memories one transaction refreshes (memory_edges_refresh_many splits larger lists).
EDGES_BATCH_MAX = 256
#
# memory_edges_refresh costs a handful of statements per memory (the neighbour search,
# the neighbours' lists, the shared people, the locks, the writes): a 10,000-entry
# import computed edges at 5-20 memories/s, far behind its embeddings. The batch
# below computes the same rows for many memories at once: the nearest neighbours of
# every memory of the batch in one LATERAL statement per owner (through the HNSW
# index, with the settings and fallbacks the owner's own search uses: _batch_nearest),
# the shared people in one statement (set operations over the participants), the
# neighbours' lists in one, and the writes in bulk. tests/memories/test_edges_batch.py
# compares it with memory_edges_refresh, memory by memory.


def _nearest_statement(*, exact: bool) -> str:
    """Each anchor's nearest among its own owner's embedded memories, itself excluded.

    Never another owner's: edges stay inside one journal. Parameters: the owner, how
    many per anchor and the anchors' ids, in the order _nearest_parameters gives.
    Exact: the owner's rows read once (MATERIALIZED) and each anchor's distances
    sorted after the WHERE (+ 0, which no index can serve),
    ties by id, as the owner's exact search (memories.search.knn._visible_neighbours);
    read once, not once per anchor: an import's memories are rewritten several times
    (embedding, edges), and each anchor's own scan of the owner's rows also walked
    their dead versions (40 ms an anchor at 2,000 memories, bench_import 2026-11-28).
    Otherwise ordered by the distance, which the planner serves from
    memory_embedding_hnsw, anchor by anchor.
    """
    table = Memory._meta.db_table
    distance = "other.embedding <=> anchor.embedding"
    if exact:
        return f"""
            WITH mine AS MATERIALIZED (
                SELECT id, embedding FROM {table} WHERE owner_id = %s AND embedding IS NOT NULL
            )
            SELECT anchor.id, near.id, near.distance
              FROM mine AS anchor
             CROSS JOIN LATERAL (
                   SELECT other.id, {distance} AS distance
                     FROM mine AS other
                    WHERE other.id <> anchor.id
                    ORDER BY ({distance}) + 0, other.id
                    LIMIT %s
             ) AS near
             WHERE anchor.id = ANY(%s)
        """
    return f"""
        SELECT anchor.id, near.id, near.distance
          FROM {table} AS anchor
         CROSS JOIN LATERAL (
               SELECT other.id, {distance} AS distance
                 FROM {table} AS other
                WHERE other.owner_id = anchor.owner_id
                  AND other.id <> anchor.id
                  AND other.embedding IS NOT NULL
                ORDER BY {distance}
                LIMIT %s
         ) AS near
         WHERE anchor.id = ANY(%s) AND anchor.owner_id = %s AND anchor.embedding IS NOT NULL
    """


def _nearest_parameters(anchor_ids: list[uuid.UUID], owner_id: int, fetch: int, *, exact: bool) -> list:
    return [owner_id, fetch, anchor_ids] if exact else [fetch, anchor_ids, owner_id]


def _batch_nearest_run(
    anchor_ids: list[uuid.UUID], owner_id: int, fetch: int, *, exact: bool
) -> dict[uuid.UUID, list[tuple[uuid.UUID, float]]]:
    found: dict[uuid.UUID, list[tuple[uuid.UUID, float]]] = {anchor_id: [] for anchor_id in anchor_ids}
    if not anchor_ids:
        return found
    with connection.cursor() as cursor:
        cursor.execute(
            _nearest_statement(exact=exact),
            _nearest_parameters(list(anchor_ids), owner_id, fetch, exact=exact),
        )
        for anchor_id, other_id, distance in cursor.fetchall():
            found[anchor_id].append((other_id, distance))
    # Rows come back roughly by distance from the relaxed HNSW scan: re-sorted on the
    # full-precision distance, ties by id, as the single search does.
    return {anchor_id: sorted(rows, key=lambda row: (row[1], row[0])) for anchor_id, rows in found.items()}


def _batch_nearest(
    anchor_ids: list[uuid.UUID], owner_id: int, limit: int
) -> dict[uuid.UUID, list[tuple[uuid.UUID, float]]]:
    """Each anchor's `limit` nearest of the owner's other memories: [(id, cosine distance)].

    The strategy of the owner's single search (memories.search.vector._nearest_neighbours
    without the gate), for the whole batch: exact for a small owner (or one too thin a
    share of the table for the index's widest scan); otherwise HNSW with the same
    ef_search and max_scan_tuples, over-fetched and re-sorted, and exact for the anchors
    that came back short when few enough memories are in play. Runs in the caller's
    transaction (the hnsw.* settings are local to it).
    """
    from memories.search import hints, knn
    from memories.search import settings as search_settings

    if hints._small_owner(owner_id):
        return _batch_nearest_run(anchor_ids, owner_id, limit, exact=True)
    fetch = limit * search_settings.ANN_OVERFETCH
    if knn._thin_in_the_table(owner_id, fetch):
        return _batch_nearest_run(anchor_ids, owner_id, limit, exact=True)
    widened = math.ceil(fetch * search_settings.ANN_EF_PER_FETCHED / max(hints._owner_share(owner_id), 1e-6))
    ef_search = max(search_settings.ANN_EF_SEARCH, min(search_settings.ANN_EF_SEARCH_MAX, widened))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), "
            "set_config('hnsw.ef_search', %s, true), set_config('hnsw.max_scan_tuples', %s, true), "
            "set_config('hnsw.scan_mem_multiplier', %s, true), "
            "set_config('max_parallel_workers_per_gather', '0', true)",
            [
                str(ef_search),
                str(max(search_settings.ANN_MAX_SCAN_TUPLES, 2 * ef_search)),
                str(search_settings.ANN_SCAN_MEM_MULTIPLIER),
            ],
        )
    found = {
        anchor_id: rows[:limit]
        for anchor_id, rows in _batch_nearest_run(anchor_ids, owner_id, fetch, exact=False).items()
    }
    short = [anchor_id for anchor_id, rows in found.items() if len(rows) < limit]
    if short and not hints._owner_has_more_than(owner_id, search_settings.EXACT_FALLBACK_MAX_MEMORIES):
        found |= _batch_nearest_run(short, owner_id, limit, exact=True)
    return found


def _batch_shared_person_targets(
    memory_ids: list[uuid.UUID],
) -> dict[uuid.UUID, list[tuple[uuid.UUID, float]]]:
    """_shared_person_targets for every memory of the batch, in one statement.

    Per memory: the owner's other memories with the most of its people (the owner's
    Self not counted), then the most recent, then by id; the first
    MEMORY_EDGES_SHARED_PERSON_LIMIT, ranked in SQL (row_number per memory).
    """
    participant = MemoryParticipant._meta.db_table
    memory = Memory._meta.db_table
    person = Person._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT anchor_id, other_id, shared FROM (
                SELECT people.anchor_id, other.memory_id AS other_id, count(*) AS shared,
                       row_number() OVER (
                           PARTITION BY people.anchor_id
                           ORDER BY count(*) DESC, other_memory.occurred_at DESC, other.memory_id
                       ) AS rank
                  FROM (SELECT own.memory_id AS anchor_id, own.person_id
                          FROM {participant} AS own
                          JOIN {person} AS person ON person.id = own.person_id
                         WHERE own.memory_id = ANY(%s) AND NOT person.is_self) AS people
                  JOIN {memory} AS anchor ON anchor.id = people.anchor_id
                  JOIN {participant} AS other
                    ON other.person_id = people.person_id AND other.memory_id <> people.anchor_id
                  JOIN {memory} AS other_memory
                    ON other_memory.id = other.memory_id AND other_memory.owner_id = anchor.owner_id
                 GROUP BY people.anchor_id, other.memory_id, other_memory.occurred_at
            ) AS ranked
             WHERE rank <= %s
             ORDER BY anchor_id, rank
            """,
            [list(memory_ids), settings.MEMORY_EDGES_SHARED_PERSON_LIMIT],
        )
        found: dict[uuid.UUID, list[tuple[uuid.UUID, float]]] = {}
        for anchor_id, other_id, shared in cursor.fetchall():
            found.setdefault(anchor_id, []).append((other_id, float(shared)))
    return found


# What a batch's memories add to a neighbour's lists: (the kind, the memory, its weight
# for that neighbour: similarity and shared people are symmetric).
Addition = tuple[str, uuid.UUID, float]

# edges_computed_at of a memory whose own lists are right but whose neighbours' may
# not be is NULL or older than its embedding: its refresh must look at its neighbours
# (the sweep runs it so). A follow-up (a neighbour whose list went stale through
# another's change) gets this instead: its refresh recomputes only its own lists, so
# follow-ups never cascade.
EDGES_FOLLOW_UP = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class BatchFollowUps:
    recompute: set[uuid.UUID]  # neighbours whose lists only a search makes right
    stale: set[uuid.UUID]  # every neighbour whose lists may have changed (merged or not)


def memory_edges_refresh_batch(*, memory_ids: Sequence[uuid.UUID], neighbours: bool = True) -> set[uuid.UUID]:
    """memory_edges_refresh for every memory of the batch, at once, in one transaction.

    The same rows as memory_edges_refresh memory by memory (each memory's own
    top lists, from its current state; see there), and the same neighbours returned
    (those whose lists may now be stale), in a few statements for the whole batch.
    Serialised with any refresh of the same memories by their advisory locks, taken
    in id order. neighbours=False: the same rows, without finding the neighbours (an
    empty set; for follow-ups, which queue nothing further).
    """
    return _edges_refresh_batch(memory_ids, neighbours=neighbours).stale


def _edges_refresh_batch(
    memory_ids: Sequence[uuid.UUID], *, neighbours: bool, done: frozenset[uuid.UUID] = frozenset()
) -> BatchFollowUps:
    """memory_edges_refresh_batch; with neighbours, their lists brought up to date in the same
    transaction where a merge can (_edges_merge), the others returned to recompute.

    `done`: memories whose lists are being refreshed by the same call (already with
    these memories in view): left alone.
    """
    nothing = BatchFollowUps(recompute=set(), stale=set())
    ids = sorted(set(memory_ids))
    if not ids:
        return nothing
    limit = settings.MEMORY_EDGES_SIMILAR_LIMIT
    minimum = settings.MEMORY_EDGES_SIMILAR_MIN_SIMILARITY
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended('edges:' || id::text, 0)) "
                "FROM unnest(%s::uuid[]) WITH ORDINALITY AS batch(id, position) ORDER BY position",
                [ids],
            )
        # Whether each has a vector, not the vector (parsing 64 of them cost ~25 ms a batch).
        rows = list(
            Memory.objects.filter(id__in=ids)
            .annotate(embedded=ExpressionWrapper(Q(embedding__isnull=False), output_field=BooleanField()))
            .values_list("id", "owner_id", "embedded")
        )
        if not rows:
            return nothing  # deleted since the task was queued; their edges went with them
        owners = {memory_id: owner_id for memory_id, owner_id, _ in rows}
        by_owner: dict[int, list[uuid.UUID]] = {}
        for memory_id, owner_id, embedded in rows:
            if embedded:
                by_owner.setdefault(owner_id, []).append(memory_id)
        near: dict[uuid.UUID, list[tuple[uuid.UUID, float]]] = {}
        for owner_id, anchor_ids in by_owner.items():
            for anchor_id, found in _batch_nearest(
                anchor_ids, owner_id, max(limit, SIMILAR_REVERSE_CANDIDATES)
            ).items():
                near[anchor_id] = [
                    (other_id, 1.0 - distance) for other_id, distance in found if 1.0 - distance >= minimum
                ]
        candidates = {other_id for found in near.values() for other_id, _ in found} if neighbours else set()
        lists = {
            row["source_id"]: (row["count"], row["weakest"])
            for row in MemoryEdge.objects.filter(source_id__in=list(candidates), kind=EdgeKind.SIMILAR)
            .values("source_id")
            .annotate(count=Count("id"), weakest=Min("weight"))
        }
        shared = _batch_shared_person_targets(list(owners))
        targets: dict[uuid.UUID, list[tuple[str, uuid.UUID, float]]] = {}
        entered: dict[uuid.UUID, set[uuid.UUID]] = {}
        for memory_id in owners:
            found = near.get(memory_id, [])
            entered[memory_id] = {
                other_id
                for other_id, similarity in found
                if other_id not in lists or lists[other_id][0] < limit or similarity > lists[other_id][1]
            }
            targets[memory_id] = [
                (EdgeKind.SIMILAR, other_id, weight) for other_id, weight in found[:limit]
            ] + [(EdgeKind.SHARED_PERSON, other_id, weight) for other_id, weight in shared.get(memory_id, [])]
        # The memories and their targets must still exist when the edges are written (a
        # deletion may be running now): locked here, the gone ones left out.
        present = memories_lock_for_reference(
            [*owners, *(target_id for found in targets.values() for _, target_id, _ in found)]
        )
        refreshed = [memory_id for memory_id in owners if memory_id in present]
        if not refreshed:
            return nothing
        pointing_here = (
            set(
                MemoryEdge.objects.filter(target_id__in=refreshed, kind__in=COMPUTED_EDGE_KINDS).values_list(
                    "source_id", flat=True
                )
            )
            if neighbours
            else set()
        )
        MemoryEdge.objects.filter(source_id__in=refreshed, kind__in=COMPUTED_EDGE_KINDS).delete()
        kept = {
            memory_id: [target for target in targets[memory_id] if target[1] in present]
            for memory_id in refreshed
        }
        MemoryEdge.objects.bulk_create(
            MemoryEdge(
                owner_id=owners[memory_id], source_id=memory_id, target_id=target_id, kind=kind, weight=weight
            )
            for memory_id in refreshed
            for kind, target_id, weight in kept[memory_id]
        )
        memories_lock_for_update(refreshed)
        Memory.objects.filter(id__in=refreshed).update(edges_computed_at=timezone.now())
        if not neighbours:
            return nothing
        batch = set(refreshed)
        pointed_to = {target_id for found in kept.values() for _, target_id, _ in found}
        entered_lists = set().union(*(entered[memory_id] for memory_id in refreshed))
        stale = (pointing_here | entered_lists | pointed_to) - batch
        # A list that pointed at one of these (whose vector or people may have changed)
        # needs a search; the others only gain these memories: merged now, in this
        # transaction, so a worker that dies leaves both undone or both done.
        additions: dict[uuid.UUID, list[Addition]] = {}
        for memory_id in refreshed:
            weights = dict(near.get(memory_id, []))
            for other_id in entered[memory_id]:
                additions.setdefault(other_id, []).append((EdgeKind.SIMILAR, memory_id, weights[other_id]))
            for kind, other_id, weight in kept[memory_id]:
                if kind == EdgeKind.SHARED_PERSON:
                    additions.setdefault(other_id, []).append((kind, memory_id, weight))
        # Of the lists that pointed here, only those whose entry no longer holds (the
        # memory's vector or people changed since) need a search.
        outdated = _lists_out_of_date(refreshed, outside=batch | done)
        skip = batch | done | outdated
        recompute = outdated | _edges_merge(
            {other_id: found for other_id, found in additions.items() if other_id not in skip}
        )
    return BatchFollowUps(recompute=recompute, stale=stale)


def _lists_out_of_date(memory_ids: list[uuid.UUID], *, outside: set[uuid.UUID]) -> set[uuid.UUID]:
    """The memories (not in `outside`) whose `similar` or `shared_person` list holds one of
    these with a weight it no longer has: a similarity of the two vectors now, the people
    (the owner's Self not counted) they now have in common.

    An entry that still holds was computed from the memory as it is: the list needs
    nothing on its account (an import's memories are often in older lists before their
    own lists are computed, as soon as they are embedded). One whose weight moved
    may have to give its place to a memory the list does not hold: only a search
    finds it.
    """
    edge, memory = MemoryEdge._meta.db_table, Memory._meta.db_table
    participant, person = MemoryParticipant._meta.db_table, Person._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT DISTINCT edge.source_id
              FROM {edge} AS edge
              JOIN {memory} AS source ON source.id = edge.source_id
              JOIN {memory} AS target ON target.id = edge.target_id
             WHERE edge.target_id = ANY(%s) AND NOT edge.source_id = ANY(%s)
               AND CASE WHEN edge.kind = %s THEN
                        source.embedding IS NULL OR target.embedding IS NULL
                        OR abs((1.0 - (source.embedding <=> target.embedding)) - edge.weight) > 1e-6
                   ELSE edge.weight <> (
                        SELECT count(*) FROM {participant} AS mine
                          JOIN {participant} AS theirs ON theirs.person_id = mine.person_id
                          JOIN {person} AS person ON person.id = mine.person_id
                         WHERE mine.memory_id = edge.source_id AND theirs.memory_id = edge.target_id
                           AND NOT person.is_self)
                   END
               AND edge.kind = ANY(%s)
            """,
            [list(memory_ids), list(outside), EdgeKind.SIMILAR, list(COMPUTED_EDGE_KINDS)],
        )
        return {row[0] for row in cursor.fetchall()}


def memory_edges_refresh_many(
    *, memory_ids: Sequence[uuid.UUID], invalidate_neighbours: bool
) -> list[uuid.UUID]:
    """memory_edges_refresh for each id, in batches (memory_edges_refresh_batch); optionally
    bring the neighbours' lists up to date.

    With `invalidate_neighbours`, a neighbour outside `memory_ids` whose list was
    complete and only gains these memories has them merged into its list, in the
    batch's transaction (_edges_merge: no search). The others (a list that pointed at
    one of these, whose vector or people may have changed; a list not computed since
    its own embedding; one being refreshed by another worker at that moment) are
    marked follow-ups (EDGES_FOLLOW_UP), so the sweep recomputes them even if no
    task does, and their ids are returned for the caller to queue. Follow-up
    refreshes run without invalidating further: one hop, no cascade.
    """
    recompute: set[uuid.UUID] = set()
    ids = sorted(set(memory_ids))
    done = frozenset(ids)
    for start in range(0, len(ids), EDGES_BATCH_MAX):
        recompute |= _edges_refresh_batch(
            ids[start : start + EDGES_BATCH_MAX], neighbours=invalidate_neighbours, done=done
        ).recompute
    if not invalidate_neighbours:
        return []
    outside = sorted(recompute - done)
    # Its own statement, after the refreshes committed: never holds one memory's
    # lock while waiting on a neighbour's row. Only complete lists are marked and
    # returned: a NULL or older stamp says the memory's own refresh is still to come
    # (queued with its embedding, or the sweep's), neighbours and all; queueing a
    # follow-up too would search twice. (And each update of a memory's row writes a
    # new version of it, in every index.)
    with transaction.atomic():
        memories_lock_for_update(outside)
        marked = list(Memory.objects.filter(_EDGES_COMPLETE, id__in=outside).values_list("id", flat=True))
        Memory.objects.filter(id__in=marked).update(edges_computed_at=EDGES_FOLLOW_UP)
    return sorted(marked)


# Its lists were computed since its own embedding, and are not a follow-up's to redo.
_EDGES_COMPLETE = Q(edges_computed_at__gt=EDGES_FOLLOW_UP) & (
    Q(embedded_at__isnull=True) | Q(edges_computed_at__gte=F("embedded_at"))
)


def _edges_merge(additions: dict[uuid.UUID, list[Addition]]) -> set[uuid.UUID]:
    """Rank these memories into these neighbours' lists; returns the neighbours to recompute instead.

    In the caller's transaction. A neighbour's `similar` list is its nearest
    (similarity >= the minimum, by similarity then id), its `shared_person` list its
    most people in common (then the most recent, then by id). If the list is
    complete (_EDGES_COMPLETE), the new memories ranked with it give the list a
    search would: the ones that rank in are written, the ones that do not dropped.
    A neighbour whose list is not complete is returned: only a search makes it right.
    So is one whose advisory lock another refresh holds now (tried, never waited
    for: this transaction holds its own batch's locks, and waiting here could deadlock
    with a refresh of that neighbour waiting for one of them).
    """
    ids = sorted(other_id for other_id, found in additions.items() if found)
    if not ids:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM unnest(%s::uuid[]) AS neighbour(id) "
            "WHERE pg_try_advisory_xact_lock(hashtextextended('edges:' || id::text, 0))",
            [ids],
        )
        locked = {row[0] for row in cursor.fetchall()}
    complete = dict(
        Memory.objects.filter(id__in=list(locked))
        .annotate(complete=ExpressionWrapper(_EDGES_COMPLETE, output_field=BooleanField()))
        .values_list("id", "complete")
    )
    # Gone ones need nothing.
    recompute = (set(ids) - locked) | {
        other_id for other_id, is_complete in complete.items() if not is_complete
    }
    merging = [other_id for other_id in ids if complete.get(other_id)]
    if merging:
        _edges_merge_write({other_id: additions[other_id] for other_id in merging})
    return recompute


def _edges_merge_write(additions: dict[uuid.UUID, list[Addition]]) -> None:
    limits = {
        EdgeKind.SIMILAR: settings.MEMORY_EDGES_SIMILAR_LIMIT,
        EdgeKind.SHARED_PERSON: settings.MEMORY_EDGES_SHARED_PERSON_LIMIT,
    }
    lists: dict[tuple[uuid.UUID, str], dict[uuid.UUID, float]] = {}
    for source_id, target_id, kind, weight in MemoryEdge.objects.filter(
        source_id__in=list(additions), kind__in=COMPUTED_EDGE_KINDS
    ).values_list("source_id", "target_id", "kind", "weight"):
        lists.setdefault((source_id, kind), {})[target_id] = weight
    added = {(other_id, kind) for other_id, found in additions.items() for kind, _, _ in found}
    # Shared-person lists rank ties by date: the dates of what they hold and of what joins.
    dated = {
        target_id
        for other_id, kind in added
        if kind == EdgeKind.SHARED_PERSON
        for target_id in lists.get((other_id, kind), {})
    } | {
        memory_id
        for found in additions.values()
        for kind, memory_id, _ in found
        if kind == EdgeKind.SHARED_PERSON
    }
    occurred = {
        memory_id: moment.timestamp()
        for memory_id, moment in Memory.objects.filter(id__in=list(dated)).values_list("id", "occurred_at")
    }
    merged: dict[tuple[uuid.UUID, str], list[tuple[uuid.UUID, float]]] = {}
    for other_id, kind in sorted(added):
        before = lists.get((other_id, kind), {})
        candidates = dict(before)
        candidates.update(
            (memory_id, weight) for added_kind, memory_id, weight in additions[other_id] if added_kind == kind
        )
        if kind == EdgeKind.SIMILAR:
            order = sorted(candidates.items(), key=lambda item: (-item[1], item[0]))
        else:
            order = sorted(
                candidates.items(), key=lambda item: (-item[1], -occurred.get(item[0], 0.0), item[0])
            )
        after = order[: limits[kind]]
        if dict(after) != before:
            merged[(other_id, kind)] = after
    if not merged:
        return
    # What is written into a list must still exist (a deletion may be running).
    present = memories_lock_for_reference(
        [
            *{other_id for other_id, _ in merged},
            *(target_id for after in merged.values() for target_id, _ in after),
        ]
    )
    owners = dict(Memory.objects.filter(id__in=list(present)).values_list("id", "owner_id"))
    written = {key: after for key, after in merged.items() if key[0] in present}
    for kind in COMPUTED_EDGE_KINDS:
        MemoryEdge.objects.filter(
            source_id__in=[key[0] for key in written if key[1] == kind], kind=kind
        ).delete()
    MemoryEdge.objects.bulk_create(
        MemoryEdge(
            owner_id=owners[other_id], source_id=other_id, target_id=target_id, kind=kind, weight=weight
        )
        for (other_id, kind), after in written.items()
        for target_id, weight in after
        if target_id in present
    )


def memory_refresh(*, memory_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Embed the memories that need it (one batch), then recompute their edges.

    Edges are recomputed for the memories embedded now and for those whose edges
    are missing or older than their embedding. Returns the neighbours whose edge
    lists were invalidated (for the caller to queue).
    """
    embedded = set(memory_embed_batch(memory_ids=memory_ids))
    stale_edges = set(
        Memory.objects.filter(id__in=list(memory_ids))
        .filter(Q(edges_computed_at__isnull=True) | Q(edges_computed_at__lt=F("embedded_at")))
        .values_list("id", flat=True)
    )
    return memory_edges_refresh_many(memory_ids=sorted(embedded | stale_edges), invalidate_neighbours=True)


@dataclass(frozen=True)
class SweepPlan:
    embed_batches: list[list[uuid.UUID]]
    stale_edges: list[uuid.UUID]  # own lists out of date: refreshed with their neighbours
    follow_ups: list[uuid.UUID]  # a neighbour's change left them stale (EDGES_FOLLOW_UP): own lists only


def memory_sweep_plan(*, batch_size: int, max_memories: int, grace: timedelta) -> SweepPlan:
    """What the beat sweep should queue: memories with no (or a stale) embedding, and stale edges.

    Memories changed within `grace` are left to the task their save queued; ones
    whose embedding is claimed by a live worker are left to that worker.
    """
    now = timezone.now()
    settled = Q(updated_at__lt=now - grace)
    stale_claim = now - timedelta(seconds=settings.MEMORY_EMBEDDING_CLAIM_TIMEOUT)
    to_embed = list(
        Memory.objects.filter(settled, embedded_at__isnull=True)
        .filter(Q(embedding_claimed_at__isnull=True) | Q(embedding_claimed_at__lt=stale_claim))
        .order_by("updated_at")
        .values_list("id", flat=True)[:max_memories]
    )
    stale = list(
        Memory.objects.filter(embedded_at__isnull=False)
        .filter(Q(edges_computed_at__isnull=True) | Q(edges_computed_at__lt=F("embedded_at")))
        .filter(Q(embedded_at__lt=now - grace))
        .order_by("embedded_at")
        .values_list("id", "edges_computed_at")[:max_memories]
    )
    batches = [to_embed[start : start + batch_size] for start in range(0, len(to_embed), batch_size)]
    return SweepPlan(
        embed_batches=batches,
        stale_edges=[memory_id for memory_id, stamp in stale if stamp != EDGES_FOLLOW_UP],
        follow_ups=[memory_id for memory_id, stamp in stale if stamp == EDGES_FOLLOW_UP],
    )
