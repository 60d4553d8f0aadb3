"""`python manage.py bench_sensitivity [--file PATH] [--errors]`: the sensitivity classifier
on a labelled list: precision and recall for `sensitive`, recall per topic, confusion matrix."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from benchmarks.sensitivity import (
    LABELLED_PATH,
    LABELS,
    SensitivityBench,
    labelled_lines,
    sensitivity_bench,
)


class Command(BaseCommand):
    help = "Precision and recall of the sensitivity classifier on a labelled list of journal lines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", type=Path, default=LABELLED_PATH, help="labelled JSONL file")
        parser.add_argument("--errors", action="store_true", help="list every miss and false alarm")

    def handle(self, *args, file: Path, errors: bool, **options) -> None:
        bench = sensitivity_bench(labelled_lines(file))
        self._summary(bench, file)
        if errors:
            self._errors(bench)

    def _summary(self, bench: SensitivityBench, file: Path) -> None:
        out = self.stdout.write
        out(f"{len(bench.outcomes)} labelled lines from {file}")
        out(f"sensitive: precision {bench.precision:.3f}  recall {bench.recall:.3f}")
        out("")
        out("confusion (rows: label, columns: classifier)")
        out(f"{'':>10} " + " ".join(f"{label:>9}" for label in LABELS))
        for label, predicted in bench.confusion.items():
            out(f"{label:>10} " + " ".join(f"{predicted[column]:>9}" for column in LABELS))
        out("")
        out("recall per topic (sensitive lines)")
        for topic, (found, total) in bench.recall_by_topic.items():
            out(f"  {topic or '—':<16} {found:>3}/{total:<3}")
        out(f"{len(bench.misses)} missed, {len(bench.false_alarms)} false alarms (--errors lists them)")

    def _errors(self, bench: SensitivityBench) -> None:
        self.stdout.write("")
        for outcome in bench.misses:
            self.stdout.write(f"  missed      [{outcome.line.topic}] {outcome.line.text}")
        for outcome in bench.false_alarms:
            self.stdout.write(f"  false alarm [{outcome.line.label}] {outcome.line.text} — {outcome.reason}")
