"""`python manage.py bench_relevance [--quick] [--errors] [--file PATH]`: precision and recall
of what reaches an agent (and of search results) on the labelled set, with the cut-off in
settings, with none, and (unless --quick) the best cut-offs of a sweep."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from benchmarks.relevance import (
    SET_PATH,
    Figures,
    bench_journal_create,
    bench_journal_delete,
    question_cutoffs,
    relevance_set,
    search_cutoffs,
    sweep,
)
from memories.retrieval import NO_CUTOFF, RelevanceCutoff, question_relevance, search_relevance

SWEEP_SHOWN = 8


def _cutoff(relevance: RelevanceCutoff) -> str:
    if relevance == NO_CUTOFF:
        return "no cut-off"
    margin = "—" if relevance.margin is None else f"{relevance.margin:.2f}"
    return (
        f"meaning ≥ {relevance.min_similarity:.2f}, words+meaning ≥ {relevance.min_text_similarity:.2f}, "
        f"margin {margin}"
    )


class Command(BaseCommand):
    help = "Precision and recall of the relevance cut-off on a labelled journal (what reaches the agent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", type=Path, default=SET_PATH, help="labelled set (JSON)")
        parser.add_argument("--quick", action="store_true", help="the settings' cut-off and none: no sweep")
        parser.add_argument("--errors", action="store_true", help="list what each cut-off got wrong")

    def handle(self, *args, file: Path, quick: bool, errors: bool, **options) -> None:
        labelled = relevance_set(file)
        out = self.stdout.write
        out(
            f"{len(labelled.journal)} memories, {len(labelled.questions)} questions, "
            f"{len(labelled.searches)} searches from {file}"
        )
        bench = bench_journal_create(labelled)
        try:
            out("")
            out(
                f"Agent questions (what reaches the agent, at most AGENT_CHAT_MEMORY_LIMIT="
                f"{settings.AGENT_CHAT_MEMORY_LIMIT}):"
            )
            chosen = bench.questions(question_relevance())
            self._line("threshold (settings)", chosen, errors)
            self._line("before (no cut-off)", bench.questions(NO_CUTOFF), errors=False)
            if not quick:
                out(f"  sweep, best {SWEEP_SHOWN} by F1:")
                for figures in sweep(bench.questions, question_cutoffs())[:SWEEP_SHOWN]:
                    self._line("", figures, errors=False)
            if labelled.searches:
                out("")
                out("Searches (the search page, owner's view):")
                self._line("threshold (settings)", bench.searches(search_relevance()), errors)
                self._line("before (no cut-off)", bench.searches(NO_CUTOFF), errors=False)
                if not quick:
                    out("  sweep:")
                    for figures in sweep(bench.searches, search_cutoffs()):
                        self._line("", figures, errors=False)
        finally:
            bench_journal_delete()

    def _line(self, label: str, figures: Figures, errors: bool) -> None:
        out = self.stdout.write
        out(
            f"  {label:<21} precision {figures.precision:.3f}  recall {figures.recall:.3f}  "
            f"F1 {figures.f1:.3f}  handed over {figures.handed:>3}  "
            f"nothing-matches {figures.empty_answered}/{figures.empty_expected}  "
            f"[{_cutoff(figures.relevance)}]"
        )
        if errors:
            for text, extra, missed in figures.misses:
                out(f"      {text!r}: extra {extra or '-'}; missed {missed or '-'}")
