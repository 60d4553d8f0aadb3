"""Fusion and results: reciprocal rank fusion of both sides, the relevance cut-off, loading.

SearchHit and RelevanceCutoff are what every search returns and takes. _fused_hits fuses
the vector side's and the full-text side's rankings (RRF), keeps the relevant ones
(_relevant: it only ever removes candidates) and loads them through the same `visible`
that ranked them (_load), so nothing the gate refuses is returned.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings as django_settings
from django.db import connection
from django.db.models import Prefetch, QuerySet

from config.rows import columns, instance
from memories.models import Memory, MemoryParticipant
from memories.search import settings, statements
from people.models import Person


@dataclass(frozen=True)
class SearchHit:
    """One result. `memory` has its participants (with their people) prefetched.

    `score` orders the results (higher is better): the fused reciprocal-rank score
    for memory_search, the cosine similarity for memory_similar. `similarity`
    (1 - cosine distance) and `text_rank` (ts_rank) say which side matched.
    """

    memory: Memory
    score: float
    similarity: float | None = None
    text_rank: float | None = None


@dataclass(frozen=True)
class RelevanceCutoff:
    """Which of the gated candidates count as relevant to a query (see _relevant).

    A memory is relevant when
    - its words match the query (full text) and its meaning is not far off:
      similarity >= `min_text_similarity` (or unknown: not embedded yet, or the
      query could not be embedded), or
    - its meaning alone is close: similarity >= `min_similarity`;
    and, when `margin` is set, its similarity is within `margin` of the best
    relevant memory's (a question's answer needs the closest few, not everything
    on the topic).

    The defaults keep every candidate (NO_CUTOFF): the cosine similarity lies in
    [-1, 1]. Calibrated values come from settings (search_relevance,
    question_relevance), measured by `python manage.py bench_relevance`.
    """

    min_similarity: float = -1.0
    min_text_similarity: float = -1.0
    margin: float | None = None


NO_CUTOFF = RelevanceCutoff()


def search_relevance() -> RelevanceCutoff:
    """Searches (web, API, MCP): every word typed matched is evidence enough; meaning alone must be close."""
    return RelevanceCutoff(min_similarity=django_settings.RELEVANCE_MIN_SIMILARITY)


def question_relevance() -> RelevanceCutoff:
    """An agent's question: its words are ORed (one common word matches a lot), so
    a word match needs some meaning too, and only the closest memories go to the agent."""
    return RelevanceCutoff(
        min_similarity=django_settings.RELEVANCE_MIN_SIMILARITY,
        min_text_similarity=django_settings.RELEVANCE_QUESTION_MIN_TEXT_SIMILARITY,
        margin=django_settings.RELEVANCE_QUESTION_MARGIN,
    )


def _relevant(
    candidates: Iterable[uuid.UUID],
    *,
    similarity: dict[uuid.UUID, float],
    text_rank: dict[uuid.UUID, float],
    relevance: RelevanceCutoff,
) -> set[uuid.UUID]:
    """The candidates `relevance` keeps (see RelevanceCutoff): only ever a subset of `candidates`."""
    kept: set[uuid.UUID] = set()
    for memory_id in candidates:
        meaning = similarity.get(memory_id)
        if memory_id in text_rank and (meaning is None or meaning >= relevance.min_text_similarity):
            kept.add(memory_id)
        elif meaning is not None and meaning >= relevance.min_similarity:
            kept.add(memory_id)
    if relevance.margin is not None:
        known = [similarity[memory_id] for memory_id in kept if memory_id in similarity]
        if known:
            floor = max(known) - relevance.margin
            kept = {memory_id for memory_id in kept if similarity.get(memory_id, floor) >= floor}
    return kept


def _fused_hits(
    visible: tuple[str, list],
    nearest: list[tuple[uuid.UUID, float]],
    text: list[tuple[uuid.UUID, float, float | None]],
    limit: int,
    *,
    relevance: RelevanceCutoff,
) -> list[SearchHit]:
    """Reciprocal rank fusion of both sides, relevant ones only, best first, loaded through `visible`.

    The relevance cut-off runs here, on the candidates the gated searches
    returned and before `limit`: it only removes candidates (a memory it keeps
    was found through `visible`, and is loaded through it again), so "nothing
    matches" is an empty list rather than the nearest memories however far.
    """
    fused: dict[uuid.UUID, float] = {}
    for ranking in (nearest, text):
        for position, (memory_id, *_) in enumerate(ranking, start=1):
            fused[memory_id] = fused.get(memory_id, 0.0) + 1.0 / (settings.RRF_K + position)
    similarity = {memory_id: 1.0 - distance for memory_id, distance in nearest}
    # The full-text side read the distance of its matches (None: not embedded yet).
    similarity |= {
        memory_id: 1.0 - distance
        for memory_id, _, distance in text
        if distance is not None and memory_id not in similarity
    }
    text_rank = {memory_id: rank for memory_id, rank, _ in text}
    relevant = _relevant(fused, similarity=similarity, text_rank=text_rank, relevance=relevance)
    best = sorted(
        relevant, key=lambda memory_id: (-fused[memory_id], -similarity.get(memory_id, -1.0), str(memory_id))
    )[:limit]
    memories = _load(visible, best)
    return [
        SearchHit(
            memory=memories[memory_id],
            score=fused[memory_id],
            similarity=similarity.get(memory_id),
            text_rank=text_rank.get(memory_id),
        )
        for memory_id in best
        if memory_id in memories
    ]


def _with_people(memories: QuerySet[Memory]) -> QuerySet[Memory]:
    return memories.select_related("source_person").prefetch_related(
        Prefetch(
            "participants",
            queryset=MemoryParticipant.objects.select_related("person").order_by("person__display_name"),
        )
    )


# What _load reads: a memory without its vectors (384 numbers to parse, and the text
# vector: never shown), each participant with its person, the source person.
_LOADED_MEMORY_FIELDS = tuple(
    field for field in Memory._meta.concrete_fields if field.attname not in ("embedding", "search_vector")
)
_PARTICIPANT_FIELDS = tuple(MemoryParticipant._meta.concrete_fields)
_PERSON_FIELDS = tuple(Person._meta.concrete_fields)
# Where each row of _load holds the memory's id, the participant's and the person's.
_LOADED_ID = [field.attname for field in _LOADED_MEMORY_FIELDS].index("id")
_PARTICIPANT_ID = [field.attname for field in _PARTICIPANT_FIELDS].index("id")
_PERSON_ID = [field.attname for field in _PERSON_FIELDS].index("id")


def _load(visible: tuple[str, list], ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Memory]:
    """The memories `ids` that pass `visible`, as _with_people would load them (participants, people).

    Loaded through the same scope, in the same transaction: a memory is only ever
    returned through the gate that ranked it. Plain SQL and Model.from_db, with
    the related objects put where select_related and prefetch_related put them
    (tests/memories/test_retrieval.py compares the two): building the ORM's two
    statements cost more than the search they finish (~2 ms of ~4). One statement
    for the memories and their participants (a row per participant, the memory's
    columns repeated): the participants of a memory the gate refuses are never read.
    """
    if not ids:
        return {}
    visible_sql, visible_params = visible
    memories: dict[uuid.UUID, Memory] = {}
    participants: dict[uuid.UUID, list[MemoryParticipant]] = {}
    people: dict[uuid.UUID, Person] = {}
    memory_width, participant_width = len(_LOADED_MEMORY_FIELDS), len(_PARTICIPANT_FIELDS)
    search = getattr(statements._SEARCH_SETTINGS, "current", None)
    if search is not None:
        # A search's last statement: its transaction's COMMIT goes with it (_SearchSettings).
        search.commit_with_next()
    # Prepared: the same statement every search, whose plan is an index lookup of ten ids.
    rows = statements._fetch_prepared(
        f"SELECT {columns('memory', _LOADED_MEMORY_FIELDS)}, {columns('participant', _PARTICIPANT_FIELDS)}, "
        f"{columns('person', _PERSON_FIELDS)} FROM {Memory._meta.db_table} memory "
        f"LEFT JOIN ({MemoryParticipant._meta.db_table} participant "
        f"  JOIN {Person._meta.db_table} person ON person.id = participant.person_id) "
        "ON participant.memory_id = memory.id "
        "WHERE memory.id = ANY(%s) AND EXISTS ("
        f"SELECT 1 FROM ({visible_sql}) AS visible (id, embedding) WHERE visible.id = memory.id) "
        "ORDER BY person.display_name, participant.id",
        [list(ids), *visible_params],
    )
    with connection.cursor() as cursor:
        for row in rows:
            memory = memories.get(row[_LOADED_ID])
            if memory is None:
                memory = instance(Memory, _LOADED_MEMORY_FIELDS, row[:memory_width])
                memories[memory.pk] = memory
                participants[memory.pk] = []
            participant_row = row[memory_width : memory_width + participant_width]
            if participant_row[_PARTICIPANT_ID] is None:  # nobody in it
                continue
            participant = instance(MemoryParticipant, _PARTICIPANT_FIELDS, participant_row)
            person_row = row[memory_width + participant_width :]
            person = people.get(person_row[_PERSON_ID]) or instance(Person, _PERSON_FIELDS, person_row)
            people[person.pk] = person
            MemoryParticipant.person.field.set_cached_value(participant, person)
            MemoryParticipant.memory.field.set_cached_value(participant, memory)
            participants[memory.pk].append(participant)
        sources = {memory.source_person_id for memory in memories.values()} - {None} - people.keys()
        if sources:
            cursor.execute(
                f"SELECT {columns('person', _PERSON_FIELDS)} FROM {Person._meta.db_table} person "
                "WHERE person.id = ANY(%s)",
                [list(sources)],
            )
            for row in cursor.fetchall():
                person = instance(Person, _PERSON_FIELDS, row)
                people[person.pk] = person
    for memory in memories.values():
        Memory.source_person.field.set_cached_value(memory, people.get(memory.source_person_id))
        # What prefetch_related("participants") leaves: the related manager's
        # queryset with its result filled in.
        loaded = memory.participants.all()
        loaded._result_cache = participants[memory.pk]
        loaded._prefetch_done = True
        memory._prefetched_objects_cache = {"participants": loaded}
    return memories
