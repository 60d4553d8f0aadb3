"""How well the relevance cut-off picks what an agent is given, on a labelled set.

benchmarks/data/relevance_set.json holds a fixed journal (people and memories, each
with a key) and two lists labelled with the keys of the memories a good answer
needs: `questions` asked of an agent in chat, and `searches` typed into search.
Some have no relevant memory at all: those must come back empty ("nothing
matches"). Everyone in the journal has consented, so the figures measure the
cut-off, not the consent gate.

The journal is written through memory_create and embedded by memory_embed_batch
(the worker's path, the real model); questions go through agent_chat_memories
(what a chat turn hands the agent) and searches through memory_search (the search
page's call), each with the cut-off under test. Precision is the share of what
was handed over that was labelled relevant; recall the share of the labelled
memories that were handed over (both summed over all questions, not averaged per
question). The set was written for this project alongside the thresholds, so the
figures are an upper bound: new wording is matched less well.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from benchmarks.seeding import delete_bench_users
from memories.models import MemoryKind, Sensitivity
from memories.retrieval import RelevanceCutoff, memory_search

SET_PATH = Path(__file__).resolve().parent / "data" / "relevance_set.json"
BENCH_USERNAME = "bench_relevance"
# What the search page asks for (memories.search_views.RESULT_LIMIT).
SEARCH_LIMIT = 30

# The thresholds swept by the full bench (cosine similarity, all-MiniLM-L6-v2): each
# cut-off runs every question through the real path, so the grid is kept small.
MIN_SIMILARITIES = (0.30, 0.35, 0.40, 0.45, 0.50)
MIN_TEXT_SIMILARITIES = (0.15, 0.20, 0.25, 0.30)
MARGINS = (0.05, 0.10, 0.15, 0.20, None)


@dataclass(frozen=True)
class Labelled:
    text: str
    relevant: frozenset[str]


@dataclass(frozen=True)
class RelevanceSet:
    people: list[str]
    journal: list[dict]
    questions: list[Labelled]
    searches: list[Labelled]


def relevance_set(path: Path = SET_PATH) -> RelevanceSet:
    data = json.loads(path.read_text(encoding="utf-8"))
    keys = {entry["key"] for entry in data["journal"]}
    if len(keys) != len(data["journal"]):
        raise ValueError(f"{path}: every memory needs a key of its own")

    def labelled(rows: Iterable[dict]) -> list[Labelled]:
        out = []
        for row in rows:
            relevant = frozenset(row["relevant"])
            if not relevant <= keys:
                raise ValueError(f"{path}: {row['text']!r} names unknown memories {sorted(relevant - keys)}")
            out.append(Labelled(text=row["text"], relevant=relevant))
        return out

    return RelevanceSet(
        people=list(data["people"]),
        journal=list(data["journal"]),
        questions=labelled(data["questions"]),
        searches=labelled(data.get("searches", [])),
    )


@dataclass
class Figures:
    """Precision and recall of what was handed over, summed over the labelled texts."""

    relevance: RelevanceCutoff
    handed: int = 0
    correct: int = 0
    labelled: int = 0
    empty_expected: int = 0
    empty_answered: int = 0
    misses: list[tuple[str, list[str], list[str]]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        # Nothing handed over is perfectly precise (nothing irrelevant was exposed).
        return self.correct / self.handed if self.handed else 1.0

    @property
    def recall(self) -> float:
        return self.correct / self.labelled if self.labelled else 1.0

    @property
    def f1(self) -> float:
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0

    def add(self, item: Labelled, handed: list[str]) -> None:
        got = set(handed)
        self.handed += len(got)
        self.correct += len(got & item.relevant)
        self.labelled += len(item.relevant)
        if not item.relevant:
            self.empty_expected += 1
            self.empty_answered += not got
        if got != item.relevant:
            self.misses.append((item.text, sorted(got - item.relevant), sorted(item.relevant - got)))


@dataclass
class Bench:
    owner: AbstractBaseUser
    keys: dict  # memory id -> key
    question_vectors: list[list[float]]
    search_vectors: list[list[float]]
    labelled_set: RelevanceSet

    def questions(self, relevance: RelevanceCutoff) -> Figures:
        from agents.services import agent_chat_memories

        figures = Figures(relevance=relevance)
        for item, vector in zip(self.labelled_set.questions, self.question_vectors, strict=True):
            memories = agent_chat_memories(
                owner=self.owner, question=item.text, relevance=relevance, question_embedding=vector
            )
            figures.add(item, [self.keys[memory.pk] for memory in memories])
        return figures

    def searches(self, relevance: RelevanceCutoff) -> Figures:
        figures = Figures(relevance=relevance)
        for item, vector in zip(self.labelled_set.searches, self.search_vectors, strict=True):
            hits = memory_search(
                self.owner, item.text, limit=SEARCH_LIMIT, query_embedding=vector, relevance=relevance
            )
            figures.add(item, [self.keys[hit.memory.pk] for hit in hits])
        return figures


def bench_journal_create(labelled_set: RelevanceSet) -> Bench:
    """A fresh bench owner (any earlier one deleted) with the journal written and embedded."""
    from accounts.services import user_signup
    from memories.embeddings import embed_texts
    from memories.services import ParticipantSpec, memory_create, memory_embed_batch
    from people.models import ConsentStatus
    from people.services import person_create, person_set_consent

    bench_journal_delete()
    now = timezone.now()
    with transaction.atomic():
        owner = user_signup(username=BENCH_USERNAME, password=secrets.token_urlsafe(24))
        people = {}
        for name in labelled_set.people:
            people[name] = person_create(owner=owner, display_name=name)
            person_set_consent(person=people[name], status=ConsentStatus.GRANTED, actor=owner)
        keys = {}
        for entry in labelled_set.journal:
            memory = memory_create(
                owner=owner,
                title=entry.get("title", ""),
                body=entry["body"],
                occurred_at=now - timedelta(days=entry.get("days_ago", 0)),
                # Kinds that never expire and a fixed sensitivity: the bench measures
                # relevance, not lifetimes or the classifier.
                kind=MemoryKind.KNOWLEDGE,
                sensitivity=Sensitivity.PERSONAL,
                participants=[ParticipantSpec(person=people[name]) for name in entry.get("people", [])],
            )
            keys[memory.pk] = entry["key"]
    memory_embed_batch(memory_ids=list(keys))
    return Bench(
        owner=owner,
        keys=keys,
        question_vectors=[row.tolist() for row in embed_texts([q.text for q in labelled_set.questions])],
        search_vectors=[row.tolist() for row in embed_texts([item.text for item in labelled_set.searches])],
        labelled_set=labelled_set,
    )


def bench_journal_delete() -> None:
    """The bench owner and everything theirs, as account deletion does it."""
    delete_bench_users(BENCH_USERNAME)


def sweep(measure: Callable[[RelevanceCutoff], Figures], cutoffs: Iterable[RelevanceCutoff]) -> list[Figures]:
    """Every cut-off measured, best F1 first (ties: fewer memories handed over)."""
    return sorted((measure(cutoff) for cutoff in cutoffs), key=lambda figures: (-figures.f1, figures.handed))


def question_cutoffs() -> list[RelevanceCutoff]:
    return [
        RelevanceCutoff(min_similarity=a, min_text_similarity=t, margin=m)
        for a in MIN_SIMILARITIES
        for t in MIN_TEXT_SIMILARITIES
        if t <= a
        for m in MARGINS
    ]


def search_cutoffs() -> list[RelevanceCutoff]:
    return [RelevanceCutoff(min_similarity=a) for a in MIN_SIMILARITIES]
