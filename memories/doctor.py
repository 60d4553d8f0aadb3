"""Health checks behind `python manage.py doctor`: find (and with --fix, repair) damage.

Each check has a read-only `find` returning the affected row ids and a `fix`
that repairs exactly those rows. Finding never writes, so `doctor` without
--fix changes nothing. Fixes are ordered so later checks see earlier repairs
(people and edges first, then duplicates, links, expiry, and the slow
embeddings last), and each fix runs in its own transaction.

Repairs never widen what agents see: a participant whose person is gone is
re-pointed to a placeholder person with consent *pending* rather than dropped,
because dropping them would hand the memory to agents without anyone's consent.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.apps import apps
from django.contrib.postgres.fields import ArrayField
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, Func, Q, UUIDField, Value
from django.utils import timezone

from memories.lifecycle import kind_lifetimes, memories_mark_expired
from memories.models import EdgeKind, Memory, MemoryEdge, MemoryParticipant, Sensitivity
from people.models import ConsentStatus, Person

PLACEHOLDER_NAME = "Unknown person (restored by doctor)"
EMBED_BATCH = 64


@dataclass(frozen=True)
class Check:
    code: str
    # How one affected row is described, e.g. "memories without an embedding".
    label: str
    find: Callable[[], list]
    fix: Callable[[list], None]
    # Long-running repair that manages its own transactions (the embedding
    # model runs for seconds; no row lock may be held meanwhile).
    slow: bool = False


@dataclass(frozen=True)
class Finding:
    check: Check
    ids: list

    @property
    def count(self) -> int:
        return len(self.ids)


# --- embeddings -----------------------------------------------------------------------------


def _current_model() -> str:
    from memories.embeddings import MODEL_NAME

    return MODEL_NAME


def find_missing_embeddings() -> list[uuid.UUID]:
    return list(
        Memory.objects.filter(embedding__isnull=True).order_by("created_at").values_list("id", flat=True)
    )


def find_stale_embeddings() -> list[uuid.UUID]:
    return list(
        Memory.objects.filter(embedding__isnull=False)
        .exclude(embedding_model=_current_model())
        .order_by("created_at")
        .values_list("id", flat=True)
    )


def _embed_now(memory_ids: Sequence[uuid.UUID]) -> None:
    """Compute vectors (and edges) now, through the workers' own service."""
    from memories.services import memory_refresh

    for start in range(0, len(memory_ids), EMBED_BATCH):
        memory_refresh(memory_ids=list(memory_ids[start : start + EMBED_BATCH]))


def fix_missing_embeddings(memory_ids: list[uuid.UUID]) -> None:
    # embedded_at without a vector would make the worker think it is done.
    Memory.objects.filter(id__in=memory_ids, embedding__isnull=True).update(
        embedded_at=None, embedding_model=""
    )
    _embed_now(memory_ids)


def fix_stale_embeddings(memory_ids: list[uuid.UUID]) -> None:
    # Until recomputed, the memory is found by full text only, never by a
    # vector from another model's space (distances between them mean nothing).
    Memory.objects.filter(id__in=memory_ids).update(
        embedding=None, embedding_model="", embedded_at=None, embedding_claimed_at=None
    )
    _embed_now(memory_ids)


def _found(sql: str) -> list:
    """The first column of every row `sql` returns: what a check finds wrong, by id."""
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return [row[0] for row in cursor.fetchall()]


def _run(sql: str, params: list) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


# --- edges ------------------------------------------------------------------------------------


def find_bad_edges() -> list[int]:
    edge, memory = MemoryEdge._meta.db_table, Memory._meta.db_table
    # Raw SQL: the ORM's joins would silently drop the very rows whose memory is gone.
    return _found(
        f"""
        SELECT e.id FROM {edge} e
        LEFT JOIN {memory} s ON s.id = e.source_id
        LEFT JOIN {memory} t ON t.id = e.target_id
        WHERE s.id IS NULL OR t.id IS NULL OR s.owner_id <> e.owner_id OR t.owner_id <> e.owner_id
        ORDER BY e.id
        """
    )


def fix_bad_edges(edge_ids: list[int]) -> None:
    _run(f"DELETE FROM {MemoryEdge._meta.db_table} WHERE id = ANY(%s)", [edge_ids])


# --- consent-gate counts ----------------------------------------------------------------------
#
# memories_memorygate (the agents' count) and circles_memoryshare (each circle's) carry counts
# that database triggers keep exact (memories 0004-0009, circles 0002-0006; the shares also copy
# the text vector). They are hints for
# the search strategy, never the gate itself, but a wrong one makes searches return too little.
# Checked against the triggers' own SQL functions; fixed by the triggers' own refresh.


def find_wrong_gate_counts() -> list[uuid.UUID]:
    return _found(
        """
        SELECT m.id FROM memories_memory m
        LEFT JOIN memories_memorygate g ON g.memory_id = m.id
        WHERE g.memory_id IS NULL
           OR g.owner_id <> m.owner_id
           OR g.blocked_count <> memories_gate_blockers(m.id, m.source_person_id)
           OR g.embedding IS DISTINCT FROM m.embedding::halfvec
        ORDER BY m.id
        """
    )


def fix_wrong_gate_counts(memory_ids: list[uuid.UUID]) -> None:
    _run("SELECT memories_gate_refresh(%s::uuid[])", [memory_ids])


def find_wrong_share_counts() -> list[uuid.UUID]:
    return _found(
        """
        SELECT DISTINCT s.memory_id FROM circles_memoryshare s
        JOIN memories_memory m ON m.id = s.memory_id
        WHERE (s.blocked_count, s.owner_id, s.occurred_at, s.embedding, s.search_vector)
              IS DISTINCT FROM (circles_share_blockers(s.memory_id, s.circle_id), m.owner_id,
                                m.occurred_at, m.embedding::halfvec, m.search_vector)
        ORDER BY s.memory_id
        """
    )


def fix_wrong_share_counts(memory_ids: list[uuid.UUID]) -> None:
    _run("SELECT circles_share_refresh(%s::uuid[], NULL)", [memory_ids])


# --- the full-text side's narrow copy ---------------------------------------------------------
#
# memories_memorytext (migration 0011) holds each memory's owner, date and text vector, and
# whether the agents' count lets it pass (0012), kept by triggers; hybrid search reads its
# full-text candidates there, so a missing or stale row hides a memory from the text side
# (never shows one the gate refuses). Checked row for row against the
# memories; fixed by copying them again and dropping rows whose memory is gone.


def find_wrong_text_copies() -> list[uuid.UUID]:
    return _found(
        """
        SELECT coalesce(m.id, t.memory_id) FROM memories_memory m
        FULL JOIN memories_memorytext t ON t.memory_id = m.id
        LEFT JOIN memories_memorygate g ON g.memory_id = m.id
        WHERE m.id IS NULL OR t.memory_id IS NULL
           OR (t.owner_id, t.occurred_at, t.search_vector, t.agents_open)
              IS DISTINCT FROM (m.owner_id, m.occurred_at, m.search_vector,
                                coalesce(g.blocked_count = 0, false))
        ORDER BY 1
        """
    )


def fix_wrong_text_copies(memory_ids: list[uuid.UUID]) -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memories_memorytext WHERE memory_id = ANY(%s::uuid[])", [memory_ids])
        cursor.execute(
            "INSERT INTO memories_memorytext (memory_id, owner_id, occurred_at, search_vector, agents_open) "
            "SELECT m.id, m.owner_id, m.occurred_at, m.search_vector, coalesce(g.blocked_count = 0, false) "
            "FROM memories_memory m LEFT JOIN memories_memorygate g ON g.memory_id = m.id "
            "WHERE m.id = ANY(%s::uuid[])",
            [memory_ids],
        )


# --- people -----------------------------------------------------------------------------------


def find_orphan_participants() -> list[int]:
    participant, memory, person = (
        MemoryParticipant._meta.db_table,
        Memory._meta.db_table,
        Person._meta.db_table,
    )
    return _found(
        f"""
        SELECT mp.id FROM {participant} mp
        LEFT JOIN {memory} m ON m.id = mp.memory_id
        LEFT JOIN {person} p ON p.id = mp.person_id
        WHERE m.id IS NULL OR p.id IS NULL OR p.owner_id <> m.owner_id
        ORDER BY mp.id
        """
    )


def _placeholder_person(owner_id: int) -> Person:
    person = Person.objects.filter(owner_id=owner_id, display_name=PLACEHOLDER_NAME, is_self=False).first()
    if person is None:
        person = Person.objects.create(
            owner_id=owner_id,
            display_name=PLACEHOLDER_NAME,
            consent_status=ConsentStatus.PENDING,
            notes="Created by `manage.py doctor` in place of a person who was missing or belonged to "
            "another account. Consent is pending, so agents cannot see these memories until you "
            "replace this placeholder with the right person.",
        )
    return person


def fix_orphan_participants(participant_ids: list[int]) -> None:
    participant, memory = MemoryParticipant._meta.db_table, Memory._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT mp.id, mp.memory_id, m.owner_id FROM {participant} mp
            LEFT JOIN {memory} m ON m.id = mp.memory_id
            WHERE mp.id = ANY(%s)
            """,
            [participant_ids],
        )
        rows = cursor.fetchall()
        orphaned_from_memory = [row_id for row_id, _, owner_id in rows if owner_id is None]
        if orphaned_from_memory:
            cursor.execute(f"DELETE FROM {participant} WHERE id = ANY(%s)", [orphaned_from_memory])
    for row_id, memory_id, owner_id in rows:
        if owner_id is None:
            continue
        placeholder = _placeholder_person(owner_id)
        if MemoryParticipant.objects.filter(memory_id=memory_id, person=placeholder).exists():
            # The memory already waits on the placeholder: one pending person is enough.
            MemoryParticipant.objects.filter(id=row_id).delete()
        else:
            MemoryParticipant.objects.filter(id=row_id).update(person=placeholder)


def find_foreign_source_people() -> list[uuid.UUID]:
    memory, person = Memory._meta.db_table, Person._meta.db_table
    return _found(
        f"""
        SELECT m.id FROM {memory} m LEFT JOIN {person} p ON p.id = m.source_person_id
        WHERE m.source_person_id IS NOT NULL AND (p.id IS NULL OR p.owner_id <> m.owner_id)
        ORDER BY m.id
        """
    )


def fix_foreign_source_people(memory_ids: list[uuid.UUID]) -> None:
    for memory_id, owner_id in Memory.objects.filter(id__in=memory_ids).values_list("id", "owner_id"):
        Memory.objects.filter(id=memory_id).update(source_person=_placeholder_person(owner_id))


# --- duplicates -------------------------------------------------------------------------------

_STRICTNESS = [Sensitivity.PUBLIC, Sensitivity.PERSONAL, Sensitivity.SENSITIVE]


def _duplicate_groups() -> list[list[uuid.UUID]]:
    keys = (
        Memory.objects.values("owner_id", "body", "occurred_at")
        .annotate(copies=Count("id"))
        .filter(copies__gt=1)
        .order_by("owner_id", "occurred_at")
    )
    groups = []
    for key in keys:
        ids = list(
            Memory.objects.filter(owner_id=key["owner_id"], body=key["body"], occurred_at=key["occurred_at"])
            .order_by("created_at", "id")
            .values_list("id", flat=True)
        )
        groups.append(ids)
    return groups


def find_duplicates() -> list[uuid.UUID]:
    """The copies that would be removed (every member of a group but its oldest)."""
    return [memory_id for group in _duplicate_groups() for memory_id in group[1:]]


def _repoint_other_references(*, duplicate: Memory, keeper: Memory) -> None:
    """Move other apps' rows (access log, chat citations…) to the keeper rather than lose them.

    Found through the model graph, so a new table pointing at memories is
    covered without editing doctor. A row the keeper already has (a uniqueness
    rule trips) stays with the duplicate and goes when it is deleted.
    """
    handled = {"participants", "edges_out", "edges_in", "supersedes"}
    handled |= {"replacement_proposals", "supersession_proposals"}
    for relation in Memory._meta.related_objects:
        if relation.get_accessor_name() in handled:
            continue
        if relation.one_to_many:
            model, field = relation.related_model, relation.field.name
        elif relation.many_to_many:
            model, field = relation.through, relation.field.m2m_reverse_field_name()
        else:
            continue
        for row_id in model._base_manager.filter(**{field: duplicate}).values_list("pk", flat=True):
            try:
                with transaction.atomic():
                    # The access log is append-only in the database; this merge is the
                    # one move its trigger allows (agents 0006), for this memory only.
                    with connection.cursor() as cursor:
                        cursor.execute(
                            "SELECT set_config('keepsake.merging_memory', %s, true)", [str(duplicate.pk)]
                        )
                    model._base_manager.filter(pk=row_id).update(**{field: keeper})
            except IntegrityError:
                pass
    # Derived text (chat replies, proposals) also keeps its sources' ids in an array, which
    # the model graph does not show as a relation. The copy's id becomes the keeper's, so
    # a reply built on the copy is judged by the keeper (as strict or stricter) instead of
    # turning into the "no longer shared" placeholder for everyone.
    for model in apps.get_models():
        field = next((f for f in model._meta.concrete_fields if f.name == "source_ids"), None)
        if not isinstance(field, ArrayField) or not isinstance(field.base_field, UUIDField):
            continue
        model._base_manager.filter(source_ids__contains=[duplicate.pk]).update(
            source_ids=Func(
                F("source_ids"),
                Value(duplicate.pk, output_field=UUIDField()),
                Value(keeper.pk, output_field=UUIDField()),
                function="array_replace",
                output_field=field,
            )
        )


def _merge_duplicate(*, duplicate: Memory, keeper: Memory) -> None:
    keeper_people = set(MemoryParticipant.objects.filter(memory=keeper).values_list("person_id", flat=True))
    for participant in MemoryParticipant.objects.filter(memory=duplicate):
        if participant.person_id not in keeper_people:
            MemoryParticipant.objects.filter(pk=participant.pk).update(memory=keeper)
            keeper_people.add(participant.person_id)
    updates: dict[str, object] = {}
    # The stricter label wins: merging must never make a copy more visible.
    if _STRICTNESS.index(duplicate.sensitivity) > _STRICTNESS.index(keeper.sensitivity):
        updates["sensitivity"] = keeper.sensitivity = duplicate.sensitivity
    if not keeper.title and duplicate.title:
        updates["title"] = keeper.title = duplicate.title
    if keeper.source_person_id is None and duplicate.source_person_id is not None:
        updates["source_person_id"] = keeper.source_person_id = duplicate.source_person_id
    if keeper.superseded_by_id is None and duplicate.superseded_by_id not in (None, keeper.pk):
        updates["superseded_by_id"] = keeper.superseded_by_id = duplicate.superseded_by_id
    if updates:
        Memory.objects.filter(pk=keeper.pk).update(**updates, edges_computed_at=None)
    # Whatever the copy replaced, the keeper now replaces.
    Memory.objects.filter(superseded_by=duplicate).exclude(pk=keeper.pk).update(superseded_by=keeper)
    Memory.objects.filter(pk=keeper.pk, superseded_by=duplicate).update(superseded_by=None)
    _repoint_other_references(duplicate=duplicate, keeper=keeper)
    duplicate.delete()
    _ensure_supersedes_edges(keeper)


def fix_duplicates(_: list[uuid.UUID]) -> None:
    for group in _duplicate_groups():
        keeper = Memory.objects.get(pk=group[0])
        for duplicate in Memory.objects.filter(pk__in=group[1:]).order_by("created_at", "id"):
            _merge_duplicate(duplicate=duplicate, keeper=keeper)


# --- supersession -----------------------------------------------------------------------------


def _ensure_supersedes_edges(memory: Memory) -> None:
    memory.refresh_from_db(fields=["superseded_by"])
    pairs = [(newer, memory.pk) for newer in [memory.superseded_by_id] if newer]
    pairs += [
        (memory.pk, older)
        for older in Memory.objects.filter(superseded_by=memory).values_list("id", flat=True)
    ]
    for newer, older in pairs:
        MemoryEdge.objects.get_or_create(
            source_id=newer,
            target_id=older,
            kind=EdgeKind.SUPERSEDES,
            defaults={"owner_id": memory.owner_id, "weight": 1.0},
        )


def find_bad_supersessions() -> list[uuid.UUID]:
    """Links that break the rules: self, another owner, another sensitivity."""
    return list(
        Memory.objects.filter(superseded_by__isnull=False)
        .filter(
            Q(superseded_by=F("pk"))
            | ~Q(superseded_by__owner_id=F("owner_id"))
            | ~Q(superseded_by__sensitivity=F("sensitivity"))
        )
        .order_by("id")
        .values_list("id", flat=True)
    )


def fix_bad_supersessions(memory_ids: list[uuid.UUID]) -> None:
    # Un-hiding the older memory is the safe direction here: it is the owner's
    # own memory, still behind the consent gate like any other.
    MemoryEdge.objects.filter(target_id__in=memory_ids, kind=EdgeKind.SUPERSEDES).delete()
    Memory.objects.filter(id__in=memory_ids).update(superseded_by=None)


# --- expiry -----------------------------------------------------------------------------------


def _expiry_mismatches() -> dict[uuid.UUID, datetime | None]:
    wrong: dict[uuid.UUID, datetime | None] = {}
    for kind, lifetime in kind_lifetimes().items():
        of_kind = Memory.objects.filter(kind=kind)
        if lifetime is None:
            rows = of_kind.filter(expires_at__isnull=False).values_list("id", flat=True)
            wrong.update(dict.fromkeys(rows))
        else:
            rows = of_kind.filter(
                Q(expires_at__isnull=True) | ~Q(expires_at=F("occurred_at") + lifetime)
            ).values_list("id", "occurred_at")
            wrong.update({memory_id: occurred_at + lifetime for memory_id, occurred_at in rows})
    return wrong


def find_wrong_expiry() -> list[uuid.UUID]:
    return sorted(_expiry_mismatches(), key=str)


def fix_wrong_expiry(_: list[uuid.UUID]) -> None:
    for memory_id, expires_at in _expiry_mismatches().items():
        Memory.objects.filter(id=memory_id).update(expires_at=expires_at)


def find_wrong_expired_marker() -> list[uuid.UUID]:
    now = timezone.now()
    return list(
        Memory.objects.filter(expired_at__isnull=False)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        .values_list("id", flat=True)
    )


def fix_wrong_expired_marker(memory_ids: list[uuid.UUID]) -> None:
    Memory.objects.filter(id__in=memory_ids).update(expired_at=None)


def find_unmarked_expired() -> list[uuid.UUID]:
    return list(
        Memory.objects.filter(expires_at__lte=timezone.now(), expired_at__isnull=True).values_list(
            "id", flat=True
        )
    )


def fix_unmarked_expired(_: list[uuid.UUID]) -> None:
    memories_mark_expired()


# Order matters for --fix: see the module docstring.
def _photos(name: str) -> Callable:
    """A check of attachments.maintenance (photos build on memories: imported when run)."""

    def run(*args):
        from attachments import maintenance

        return getattr(maintenance, name)(*args)

    return run


CHECKS: tuple[Check, ...] = (
    Check("bad_edges", "edges pointing at a deleted memory or across owners", find_bad_edges, fix_bad_edges),
    Check(
        "orphan_participants",
        "participants whose person is missing or belongs to another owner",
        find_orphan_participants,
        fix_orphan_participants,
    ),
    Check(
        "foreign_source_people",
        "memories whose source person is missing or belongs to another owner",
        find_foreign_source_people,
        fix_foreign_source_people,
    ),
    Check(
        "duplicates", "exact duplicate memories (same owner, body and time)", find_duplicates, fix_duplicates
    ),
    Check(
        "bad_supersessions",
        "replacement links to itself, another owner or another sensitivity",
        find_bad_supersessions,
        fix_bad_supersessions,
    ),
    Check(
        "wrong_expiry", "memories whose expiry does not match their kind", find_wrong_expiry, fix_wrong_expiry
    ),
    Check(
        "wrong_expired_marker",
        "memories marked expired that have not expired",
        find_wrong_expired_marker,
        fix_wrong_expired_marker,
    ),
    Check("unmarked_expired", "expired memories not yet marked", find_unmarked_expired, fix_unmarked_expired),
    Check(
        "wrong_gate_counts",
        "memories whose agents' consent count is not what their people's consent makes it",
        find_wrong_gate_counts,
        fix_wrong_gate_counts,
    ),
    Check(
        "wrong_share_counts",
        "shared memories whose circle consent count or copy of the memory is out of date",
        find_wrong_share_counts,
        fix_wrong_share_counts,
    ),
    Check(
        "wrong_text_copies",
        "memories whose copy for full-text search is missing or out of date",
        find_wrong_text_copies,
        fix_wrong_text_copies,
    ),
    Check(
        "photo_rows_without_files",
        "photos whose files are missing from the store",
        _photos("find_photo_rows_without_files"),
        _photos("fix_photo_rows_without_files"),
    ),
    Check(
        "orphan_photo_files",
        "files in the photo store that belong to no photo",
        _photos("find_orphan_photo_files"),
        _photos("fix_orphan_photo_files"),
    ),
    Check(
        "stale_embeddings",
        "memories embedded with another model",
        find_stale_embeddings,
        fix_stale_embeddings,
        slow=True,
    ),
    Check(
        "missing_embeddings",
        "memories without an embedding",
        find_missing_embeddings,
        fix_missing_embeddings,
        slow=True,
    ),
)


def doctor_examine() -> list[Finding]:
    """Every check's findings (read-only)."""
    return [Finding(check, check.find()) for check in CHECKS]


def doctor_repair(*, on_fixed: Callable[[Finding], None] | None = None) -> None:
    """Fix what each check finds, in order; each check's repair commits on its own."""
    for check in CHECKS:
        ids = check.find()
        if not ids:
            continue
        if check.slow:
            check.fix(ids)
        else:
            with transaction.atomic():
                check.fix(ids)
        if on_fixed is not None:
            on_fixed(Finding(check, ids))
