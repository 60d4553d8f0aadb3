"""bench_retrieval runs end to end on a tiny world and prints its figures.

A smoke test of the command, not a measurement: the figures themselves are for
the README's Performance section (tests never assert on time). Transactional:
the command vacuums and rebuilds the agents' index, which a test transaction
would not allow.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from memories.models import Memory, MemoryGate

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_retrieval_prints_latency_recall_and_rows_for_each_gated_fraction():
    out = StringIO()
    call_command("bench_retrieval", memories=400, gated="0.5,0.99", queries=5, compare=True, stdout=out)
    text = out.getvalue()

    assert "One consent change for a person in" in text
    assert re.search(r"pgvector [0-9.]+, \d+ CPUs: \S.*\. Latency excludes", text), text
    # The first search after the process starts, and after each change, apart from the steady state.
    assert re.search(
        r"^First search in this process: the owner's kNN [0-9.]+ ms, hybrid [0-9.]+ ms", text, re.M
    )
    for fraction in ("0.50", "0.99"):
        assert re.search(rf"^\s*{fraction} the agents' first kNN after the change: [0-9.]+ ms", text, re.M), (
            text
        )
    rows = {
        (match["fraction"], match["label"].strip()): match
        for match in re.finditer(
            r"^\s*(?P<fraction>[-0-9.]+) (?P<label>[a-z (),:-]+?)\s+(?P<p50>[0-9.]+)\s+(?P<p95>[0-9.]+)"
            r"\s+(?P<p99>[0-9.]+)\s+(?P<recall>[0-9.]+|nan)\s+(?P<rows>[0-9.]+)/10$",
            text,
            re.MULTILINE,
        )
    }
    for fraction in ("0.50", "0.99"):
        assert (fraction, "agent (gated) knn") in rows
        # Exact search over a 400-memory owner: every gated result is the right one.
        assert float(rows[(fraction, "agent (gated) knn")]["recall"]) == 1.0
    assert float(rows[("0.50", "agent (gated) knn")]["rows"]) == 10.0
    # Everything gated: nothing returned.
    assert float(rows[("1.00", "agent knn, zero-match")]["rows"]) == 0.0
    assert "zero-match p95 / ungated p95" in text
    assert "text: words" in text
    # Where the hybrid search's full-text side ran (settings.SEARCH_SIDES_IN_PARALLEL).
    where = "on the search helper's" if settings.SEARCH_SIDES_IN_PARALLEL else "after the vector side"
    assert f"\nHybrid search's full-text side: {where}" in text
    # --compare: each peer pattern measured at each fraction against the same exact truth.
    for fraction in ("0.50", "0.99"):
        for peer in ("peer: post-filter top-k", "peer: filtered, defaults", "peer: strict iterative"):
            assert (fraction, peer) in rows, (fraction, peer)
    # Post-filtering the owner's top 10 when 99% is gated leaves (almost) nothing.
    assert float(rows[("0.99", "peer: post-filter top-k")]["rows"]) < 10.0
    # The run restores full consent and keeps the gate rows and their copies.
    owner_memories = Memory.objects.filter(owner__username="bench_retrieval")
    assert owner_memories.count() == 400
    assert MemoryGate.objects.filter(memory__in=owner_memories, blocked_count=0).count() == 400
    assert not MemoryGate.objects.filter(memory__in=owner_memories, embedding__isnull=True).exists()


def test_bench_retrieval_text_modes_seed_realistic_or_vocabulary_text():
    call_command("bench_retrieval", memories=60, gated="0.5", queries=2, text="vocabulary", stdout=StringIO())
    old = Memory.objects.filter(owner__username="bench_retrieval")
    assert set(old.values_list("embedding_model", flat=True)) == {"bench-random"}
    assert all(len(body.split()) == 12 for body in old.values_list("body", flat=True))
    # Changing the mode reseeds instead of reusing the other mode's text.
    call_command("bench_retrieval", memories=60, gated="0.5", queries=2, text="words", stdout=StringIO())
    new = Memory.objects.filter(owner__username="bench_retrieval")
    assert set(new.values_list("embedding_model", flat=True)) == {"bench-random-words"}
    lengths = [len(body.split()) for body in new.values_list("body", flat=True)]
    assert min(lengths) >= 10 and max(lengths) <= 80 and len(set(lengths)) > 5


def test_bench_retrieval_clean_removes_its_users():
    call_command("bench_retrieval", memories=50, gated="0.5", queries=2, stdout=StringIO())
    call_command("bench_retrieval", clean=True, stdout=StringIO())
    assert not Memory.objects.filter(owner__username__startswith="bench_retrieval").exists()


def test_bench_retrieval_beside_other_owners_indexes_them_and_can_measure_the_owner_alone():
    # Every owner's open rows are in the agents' index, as the indexing task leaves
    # them: otherwise an agent's search beside other owners would look easier.
    out = StringIO()
    call_command(
        "bench_retrieval",
        memories=40,
        owner="small",
        other_owners=2,
        other_memories=30,
        gated="none",
        queries=2,
        stdout=out,
    )
    text = out.getvalue()

    assert not MemoryGate.objects.filter(blocked_count=0, indexed=False, embedding__isnull=False).exists()
    assert (
        MemoryGate.objects.filter(memory__owner__username__startswith="bench_retrieval_other_").count() == 60
    )
    assert "owner (ungated) knn" in text and "owner hybrid search" in text
    assert "agent (gated) knn" not in text  # --gated none: the owner's searches only
    with pytest.raises(CommandError, match="or none"):
        call_command("bench_retrieval", memories=40, gated="", queries=2, stdout=StringIO())
