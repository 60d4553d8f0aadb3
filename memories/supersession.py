"""Supersession: a newer memory replacing an older one ("she moved to Berlin" replaces
"she lives in Paris").

`older.superseded_by = newer` plus a `supersedes` edge (newer -> older). The
agent retrieval selector drops every memory whose superseded_by is set, so
agents see only the newest; the owner keeps the whole chain.

A link is only allowed between two memories of one owner with the same
sensitivity and the same sharing scope: otherwise hiding the older memory could
take away something a viewer of the older one may see, while the newer one is
not shown to them. The worker proposes candidates (same kind, same subject
people, high embedding similarity); nothing is linked until the owner confirms.

Services (writes) and the two owner-facing selectors live together here
because they share these rules.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone
from pgvector.django import CosineDistance

from memories.models import (
    EdgeKind,
    Memory,
    MemoryEdge,
    MemoryParticipant,
    ParticipantRole,
    ProposalStatus,
    SupersessionProposal,
)
from memories.services import memories_lock_for_reference

# --- Rules ---------------------------------------------------------------------------------


def memory_sharing_scope(memory: Memory) -> tuple[str, object]:
    """Who besides the owner's agents may be shown this memory.

    There are no circles yet, so every memory is private to its owner and the
    scope is the owner. When memories can be shared into circles this must
    return the circle, so that a private memory never hides a shared one.
    """
    return ("private", memory.owner_id)


def _refuse_unless_linkable(*, owner: AbstractBaseUser, older: Memory, newer: Memory) -> None:
    if older.owner_id != owner.pk or newer.owner_id != owner.pk:
        # Never confirm that someone else's memory exists.
        raise ValidationError({"superseded_by": "Unknown memory."})
    if older.pk == newer.pk:
        raise ValidationError({"superseded_by": "A memory cannot replace itself."})
    if older.sensitivity != newer.sensitivity:
        raise ValidationError(
            {
                "superseded_by": f"Only memories with the same sensitivity can replace each other "
                f"(the older one is {older.get_sensitivity_display().lower()}, the newer one "
                f"{newer.get_sensitivity_display().lower()}). Change one of them first."
            }
        )
    if memory_sharing_scope(older) != memory_sharing_scope(newer):
        raise ValidationError(
            {"superseded_by": "Only memories shared with the same people can replace each other."}
        )


def _replaced_chain(memory: Memory) -> list[uuid.UUID]:
    """Ids reached by following superseded_by forward from `memory` (cycle-safe)."""
    seen: list[uuid.UUID] = []
    next_id = memory.superseded_by_id
    while next_id is not None and next_id not in seen:
        seen.append(next_id)
        next_id = Memory.objects.filter(pk=next_id).values_list("superseded_by_id", flat=True).first()
    return seen


# --- Services ------------------------------------------------------------------------------


@transaction.atomic
def memory_supersede(*, owner: AbstractBaseUser, older: Memory, newer: Memory) -> Memory:
    """Mark `newer` as replacing `older`. Idempotent; refuses self, cycles and mismatches."""
    # Lock both rows in a fixed order: two owners' tabs confirming crossing
    # links at once must not deadlock, and the cycle check must see settled rows.
    locked = {m.pk: m for m in Memory.objects.select_for_update().filter(pk__in=[older.pk, newer.pk])}
    if older.pk not in locked or newer.pk not in locked:
        raise ValidationError({"superseded_by": "Unknown memory."})
    older, newer = locked[older.pk], locked[newer.pk]
    _refuse_unless_linkable(owner=owner, older=older, newer=newer)
    if older.superseded_by_id == newer.pk:
        return older
    if older.superseded_by_id is not None:
        raise ValidationError(
            {"superseded_by": "That memory is already replaced by another one. Undo that link first."}
        )
    if older.pk in _replaced_chain(newer):
        raise ValidationError(
            {"superseded_by": "That would make a loop: the newer memory is itself replaced by the older one."}
        )
    Memory.objects.filter(pk=older.pk).update(superseded_by=newer, updated_at=timezone.now())
    older.superseded_by = newer
    MemoryEdge.objects.update_or_create(
        source=newer, target=older, kind=EdgeKind.SUPERSEDES, defaults={"owner_id": owner.pk, "weight": 1.0}
    )
    SupersessionProposal.objects.filter(older=older, newer=newer, status=ProposalStatus.PENDING).update(
        status=ProposalStatus.CONFIRMED, decided_at=timezone.now()
    )
    return older


@transaction.atomic
def memory_unsupersede(*, owner: AbstractBaseUser, memory: Memory) -> Memory:
    """Undo: `memory` is no longer replaced (agents may see it again, consent permitting)."""
    if memory.owner_id != owner.pk:
        raise ValidationError({"superseded_by": "Unknown memory."})
    replaced_by = memory.superseded_by_id
    if replaced_by is None:
        return memory
    Memory.objects.filter(pk=memory.pk).update(superseded_by=None, updated_at=timezone.now())
    MemoryEdge.objects.filter(source_id=replaced_by, target=memory, kind=EdgeKind.SUPERSEDES).delete()
    memory.superseded_by = None
    return memory


def _proposal_locked(*, owner: AbstractBaseUser, proposal: SupersessionProposal) -> SupersessionProposal:
    """The proposal as it is now, locked for the decision; one not the owner's is unknown."""
    proposal = SupersessionProposal.objects.select_for_update().get(pk=proposal.pk)
    if proposal.owner_id != owner.pk:
        raise ValidationError({"proposal": "Unknown suggestion."})
    return proposal


@transaction.atomic
def supersession_proposal_confirm(
    *, owner: AbstractBaseUser, proposal: SupersessionProposal
) -> SupersessionProposal:
    """The owner agrees: link the pair (memory_supersede's rules still apply)."""
    proposal = _proposal_locked(owner=owner, proposal=proposal)
    if proposal.status == ProposalStatus.CONFIRMED:
        return proposal
    memory_supersede(owner=owner, older=proposal.older, newer=proposal.newer)
    SupersessionProposal.objects.filter(pk=proposal.pk).update(
        status=ProposalStatus.CONFIRMED, decided_at=timezone.now()
    )
    proposal.refresh_from_db()
    return proposal


@transaction.atomic
def supersession_proposal_dismiss(
    *, owner: AbstractBaseUser, proposal: SupersessionProposal
) -> SupersessionProposal:
    """The owner says no; the pair is remembered so it is never proposed again."""
    proposal = _proposal_locked(owner=owner, proposal=proposal)
    if proposal.status == ProposalStatus.PENDING:
        proposal.status = ProposalStatus.DISMISSED
        proposal.decided_at = timezone.now()
        proposal.save(update_fields=["status", "decided_at"])
    return proposal


def _subject_sets(memory_ids: list[uuid.UUID]) -> dict[uuid.UUID, frozenset[uuid.UUID]]:
    subjects: dict[uuid.UUID, set[uuid.UUID]] = {memory_id: set() for memory_id in memory_ids}
    rows = MemoryParticipant.objects.filter(memory_id__in=memory_ids, role=ParticipantRole.SUBJECT)
    for memory_id, person_id in rows.values_list("memory_id", "person_id"):
        subjects[memory_id].add(person_id)
    return {memory_id: frozenset(people) for memory_id, people in subjects.items()}


def supersession_propose(*, memory_id: uuid.UUID, limit: int = 3) -> list[SupersessionProposal]:
    """Propose older memories that `memory_id` may replace; returns the pending ones. Idempotent.

    A candidate is an older memory of the same owner, kind, sensitivity and
    sharing scope, not already replaced, about exactly the same subject people
    (none on both sides = about the owner), with cosine similarity of at least
    SUPERSESSION_MIN_SIMILARITY. Pairs already proposed (pending, confirmed or
    dismissed) are left alone, so a redelivered task or a dismissed pair never
    comes back. Without an embedding there is nothing to compare yet: the
    memory is not stamped and the sweep retries it after the embedding lands.
    """
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is None or memory.embedding is None:
        return []
    checked_at = timezone.now()
    proposals: list[SupersessionProposal] = []
    if memory.superseded_by_id is None:
        max_distance = 1.0 - settings.SUPERSESSION_MIN_SIMILARITY
        older = Q(occurred_at__lt=memory.occurred_at) | Q(
            occurred_at=memory.occurred_at, created_at__lt=memory.created_at
        )
        # A WHERE on the distance (no ORDER BY … LIMIT) keeps the planner off the
        # global HNSW index, whose nearest neighbours may all belong to others;
        # the owner + kind filter keeps this exact scan small.
        candidates = list(
            Memory.objects.filter(
                older,
                owner_id=memory.owner_id,
                kind=memory.kind,
                sensitivity=memory.sensitivity,
                superseded_by__isnull=True,
                embedding__isnull=False,
            )
            .exclude(pk=memory.pk)
            .annotate(distance=CosineDistance("embedding", memory.embedding))
            .filter(distance__lte=max_distance)
            .only("id", "owner_id", "occurred_at")
        )
        candidates.sort(key=lambda candidate: candidate.distance)
        subjects = _subject_sets([memory.pk, *(candidate.pk for candidate in candidates)])
        scope = memory_sharing_scope(memory)
        chosen = [
            candidate
            for candidate in candidates
            if subjects[candidate.pk] == subjects[memory.pk] and memory_sharing_scope(candidate) == scope
        ][:limit]
        with transaction.atomic():
            # A memory deleted meanwhile is skipped, never a failed COMMIT (memories_lock_for_reference).
            present = memories_lock_for_reference([memory.pk, *(candidate.pk for candidate in chosen)])
            if memory.pk not in present:
                return []
            chosen = [candidate for candidate in chosen if candidate.pk in present]
            SupersessionProposal.objects.bulk_create(
                [
                    SupersessionProposal(
                        owner_id=memory.owner_id,
                        older=candidate,
                        newer=memory,
                        similarity=round(1.0 - candidate.distance, 4),
                    )
                    for candidate in chosen
                ],
                ignore_conflicts=True,
            )
        proposals = list(
            SupersessionProposal.objects.filter(
                newer=memory,
                older__in=[candidate.pk for candidate in chosen],
                status=ProposalStatus.PENDING,
            )
        )
    Memory.objects.filter(pk=memory.pk).update(supersession_checked_at=checked_at)
    return proposals


def supersession_memories_to_check(*, limit: int = 200) -> list[uuid.UUID]:
    """Memories embedded since their last supersession check (for the beat sweep)."""
    return list(
        Memory.objects.filter(embedded_at__isnull=False)
        .filter(Q(supersession_checked_at__isnull=True) | Q(supersession_checked_at__lt=F("embedded_at")))
        .order_by("embedded_at")
        .values_list("id", flat=True)[:limit]
    )


# --- Selectors (owner view) -----------------------------------------------------------------


@dataclass(frozen=True)
class SupersessionCandidate:
    proposal: SupersessionProposal
    # The other memory of the pair, seen from the memory whose page is shown.
    other: Memory
    # True when the memory on the page is the newer one ("this may replace …").
    this_is_newer: bool


def supersession_candidates(memory: Memory) -> list[SupersessionCandidate]:
    """Pending suggestions involving this memory, strongest first, for the owner's memory page.

    Suggestions that no longer apply (the older one meanwhile replaced, or the
    two no longer share a sensitivity) are left out rather than offered and refused.
    """
    proposals = (
        SupersessionProposal.objects.filter(owner_id=memory.owner_id, status=ProposalStatus.PENDING)
        .filter(Q(older=memory) | Q(newer=memory))
        .filter(older__superseded_by__isnull=True)
        .select_related("older", "newer")
        .order_by("-similarity", "created_at")
    )
    return [
        SupersessionCandidate(
            proposal=proposal,
            other=proposal.older if proposal.newer_id == memory.pk else proposal.newer,
            this_is_newer=proposal.newer_id == memory.pk,
        )
        for proposal in proposals
        if proposal.older.sensitivity == proposal.newer.sensitivity
    ]


def supersession_proposal_get(*, owner: AbstractBaseUser, proposal_id: object) -> SupersessionProposal:
    """The owner's suggestion, or 404."""
    return get_object_or_404(
        SupersessionProposal.objects.select_related("older", "newer"), owner_id=owner.pk, pk=proposal_id
    )


def memory_supersession_chain(memory: Memory) -> list[Memory]:
    """Every memory linked to this one by supersession, oldest first, itself included.

    The owner sees the whole history; each item's `superseded_by_id` says what
    replaced it (None: the current one). Branches are possible (two old
    memories replaced by one new one) and are all included.
    """
    owner_memories: QuerySet[Memory] = Memory.objects.filter(owner_id=memory.owner_id)
    chain: dict[uuid.UUID, Memory] = {memory.pk: memory}
    frontier = {memory.pk}
    # Walk both directions one hop per query until nothing new turns up; the
    # `chain` dict doubles as the visited set, so a corrupt cycle still ends.
    while frontier:
        linked = owner_memories.filter(Q(superseded_by_id__in=frontier) | Q(supersedes__in=frontier)).exclude(
            pk__in=list(chain)
        )
        found = {m.pk: m for m in linked.distinct()}
        chain.update(found)
        frontier = set(found)
    return sorted(chain.values(), key=lambda m: (m.occurred_at, m.created_at))
