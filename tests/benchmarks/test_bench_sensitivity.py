"""The sensitivity classifier measured on the labelled list in the repository."""

from __future__ import annotations

import json
from collections import Counter
from io import StringIO

from django.core.management import call_command

from benchmarks.sensitivity import LABELLED_PATH, labelled_lines, sensitivity_bench
from memories.models import Sensitivity

# Measured on the list as committed: 165 of 172 sensitive lines found (0.959), 7 false
# alarms among 172 flagged (0.959). The floors leave room for one more miss or false alarm,
# so a change to the rules that loses ground fails here.
MIN_RECALL = 0.95
MIN_PRECISION = 0.95


def test_labelled_list_is_large_enough_and_covers_every_label_and_topic():
    lines = labelled_lines()
    assert len(lines) >= 150
    assert len({line.text for line in lines}) == len(lines)  # no duplicates
    labels = Counter(line.label for line in lines)
    assert set(labels) == set(Sensitivity.values)
    topics = {line.topic for line in lines if line.label == Sensitivity.SENSITIVE}
    assert {
        "health",
        "mental_health",
        "finance",
        "work",
        "sex_life",
        "sexuality",
        "religion",
        "politics",
    } <= topics


def test_recall_and_precision_for_sensitive_stay_above_what_was_measured():
    bench = sensitivity_bench(labelled_lines())
    missed = [outcome.line.text for outcome in bench.misses]
    assert bench.recall >= MIN_RECALL, f"recall {bench.recall:.3f}; missed: {missed}"
    assert bench.precision >= MIN_PRECISION, f"precision {bench.precision:.3f}"
    # The classifier never proposes public: every prediction is personal or sensitive.
    assert all(predicted[Sensitivity.PUBLIC] == 0 for predicted in bench.confusion.values())


def test_the_phrases_the_issue_named_as_missed_are_caught_on_every_line():
    for phrase in ("health checkup", "laid off", "was fired", "debt", "therapy", "pregnant"):
        lines = [line for line in labelled_lines() if phrase in line.text.lower()]
        assert lines, phrase
        assert sensitivity_bench(lines).recall == 1.0, phrase


def test_bench_command_prints_precision_recall_and_the_confusion_matrix(tmp_path):
    labelled = tmp_path / "labelled.jsonl"
    rows = [
        {"text": "Got laid off today", "label": "sensitive", "topic": "work"},
        {"text": "Ran into Sam at the quiz", "label": "sensitive", "topic": "made_up"},
        {"text": "Anna loves jazz", "label": "personal"},
        {"text": "The hospital car park takes cards", "label": "public"},
    ]
    labelled.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = StringIO()

    call_command("bench_sensitivity", "--file", str(labelled), "--errors", stdout=out)

    text = out.getvalue()
    assert "sensitive: precision 0.500  recall 0.500" in text
    assert "confusion (rows: label, columns: classifier)" in text
    assert " sensitive         0         1         1" in text.splitlines()
    assert "missed      [made_up] Ran into Sam at the quiz" in text
    assert "false alarm [public] The hospital car park takes cards" in text


def test_bench_command_runs_on_the_committed_list():
    out = StringIO()
    call_command("bench_sensitivity", stdout=out)
    assert f"labelled lines from {LABELLED_PATH}" in out.getvalue()
