"""How well classify_sensitivity does on a labelled list of journal lines.

benchmarks/data/sensitivity_labelled.jsonl holds short journal lines, one JSON
object a line: {"text": ..., "label": "public" | "personal" | "sensitive",
"topic": ...}. The topic says why a line is labelled as it is (health, work,
near_miss, …) and is only used to break recall down. The list was written for
this project, alongside the rules, so its figures are an upper bound: new
wording the rules have not seen is missed more often.

The classifier never proposes `public` (see memories/classify.py), so its
predictions fall in two columns; what matters is recall for `sensitive` (a miss
can be shown too widely) and then precision (a false alarm costs a click).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from memories.classify import classify_sensitivity
from memories.models import Sensitivity

LABELLED_PATH = Path(__file__).resolve().parent / "data" / "sensitivity_labelled.jsonl"
LABELS = tuple(Sensitivity.values)  # public, personal, sensitive


@dataclass(frozen=True)
class LabelledLine:
    text: str
    label: str
    topic: str = ""


@dataclass(frozen=True)
class Outcome:
    line: LabelledLine
    predicted: str
    reason: str


@dataclass
class SensitivityBench:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def confusion(self) -> dict[str, Counter[str]]:
        """true label -> predicted label -> count."""
        matrix: dict[str, Counter[str]] = {label: Counter() for label in LABELS}
        for outcome in self.outcomes:
            matrix[outcome.line.label][outcome.predicted] += 1
        return matrix

    def _counts(self) -> tuple[int, int, int]:
        true_positives = false_positives = false_negatives = 0
        for outcome in self.outcomes:
            actual = outcome.line.label == Sensitivity.SENSITIVE
            predicted = outcome.predicted == Sensitivity.SENSITIVE
            true_positives += actual and predicted
            false_positives += predicted and not actual
            false_negatives += actual and not predicted
        return true_positives, false_positives, false_negatives

    @property
    def precision(self) -> float:
        true_positives, false_positives, _ = self._counts()
        flagged = true_positives + false_positives
        return true_positives / flagged if flagged else 0.0

    @property
    def recall(self) -> float:
        true_positives, _, false_negatives = self._counts()
        sensitive = true_positives + false_negatives
        return true_positives / sensitive if sensitive else 0.0

    @property
    def recall_by_topic(self) -> dict[str, tuple[int, int]]:
        """topic -> (found, labelled sensitive), for the sensitive lines."""
        found: Counter[str] = Counter()
        total: Counter[str] = Counter()
        for outcome in self.outcomes:
            if outcome.line.label == Sensitivity.SENSITIVE:
                total[outcome.line.topic] += 1
                found[outcome.line.topic] += outcome.predicted == Sensitivity.SENSITIVE
        return {topic: (found[topic], total[topic]) for topic in sorted(total)}

    @property
    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.line.label == Sensitivity.SENSITIVE != o.predicted]

    @property
    def false_alarms(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.predicted == Sensitivity.SENSITIVE != o.line.label]


def labelled_lines(path: Path = LABELLED_PATH) -> list[LabelledLine]:
    lines: list[LabelledLine] = []
    with path.open(encoding="utf-8") as labelled:
        for number, raw in enumerate(labelled, start=1):
            if not raw.strip():
                continue
            row = json.loads(raw)
            if row.get("label") not in LABELS or not isinstance(row.get("text"), str):
                raise ValueError(f"{path}:{number}: needs a text and a label out of {', '.join(LABELS)}")
            lines.append(LabelledLine(text=row["text"], label=row["label"], topic=row.get("topic", "")))
    return lines


def sensitivity_bench(lines: list[LabelledLine]) -> SensitivityBench:
    bench = SensitivityBench()
    for line in lines:
        guess = classify_sensitivity(body=line.text)
        bench.outcomes.append(Outcome(line=line, predicted=str(guess.sensitivity), reason=guess.reason))
    return bench
