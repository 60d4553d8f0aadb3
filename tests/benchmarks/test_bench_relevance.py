"""bench_relevance on the committed labelled set, quick mode: the figures are printed and sane."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command

from benchmarks.relevance import BENCH_USERNAME, SET_PATH, relevance_set

pytestmark = pytest.mark.django_db

FIGURES = re.compile(
    r"^  (?P<label>threshold \(settings\)|before \(no cut-off\))\s+precision (?P<precision>[\d.]+)  "
    r"recall (?P<recall>[\d.]+)  F1 [\d.]+  handed over\s+(?P<handed>\d+)  "
    r"nothing-matches (?P<empty>\d+)/(?P<expected>\d+)",
    re.MULTILINE,
)


def test_labelled_set_names_only_its_own_memories_and_has_questions_with_no_answer():
    labelled = relevance_set()
    assert len(labelled.journal) >= 30
    assert len(labelled.questions) >= 30
    assert sum(not item.relevant for item in labelled.questions) >= 5
    assert sum(bool(item.relevant) for item in labelled.searches) >= 5


def test_bench_quick_prints_precision_and_recall_and_the_cutoff_beats_none(django_user_model):
    out = StringIO()

    call_command("bench_relevance", "--quick", stdout=out)

    text = out.getvalue()
    assert f"from {SET_PATH}" in text
    assert "meaning ≥ 0.35, words+meaning ≥ 0.25, margin 0.10" in text  # the settings' threshold
    rows = [match.groupdict() for match in FIGURES.finditer(text)]
    assert [row["label"] for row in rows] == [
        "threshold (settings)",
        "before (no cut-off)",
        "threshold (settings)",
        "before (no cut-off)",
    ]
    for row in rows:
        assert 0.0 <= float(row["precision"]) <= 1.0
        assert 0.0 <= float(row["recall"]) <= 1.0
    questions_cut, questions_all, search_cut, search_all = rows
    # What the cut-off is for: far fewer memories handed over, most nonsense answered with
    # nothing, and precision up, while most of what a question needs still reaches the agent.
    assert int(questions_cut["handed"]) < int(questions_all["handed"])
    assert float(questions_cut["precision"]) > float(questions_all["precision"])
    assert int(questions_cut["empty"]) >= int(questions_cut["expected"]) - 1
    assert questions_all["empty"] == "0"
    assert float(questions_cut["recall"]) >= 0.8
    assert float(search_cut["precision"]) > float(search_all["precision"])
    assert float(search_cut["recall"]) >= 0.7
    # The bench's journal is gone afterwards.
    assert not django_user_model.objects.filter(username=BENCH_USERNAME).exists()
