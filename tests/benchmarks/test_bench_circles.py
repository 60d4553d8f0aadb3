"""bench_circles runs end to end on a tiny world and prints its figures (a smoke test, not a measurement)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command

from circles.models import Circle, MemoryShare

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_circles_prints_each_consented_fraction_and_shares_what_it_says():
    out = StringIO()
    call_command("bench_circles", memories=300, shared=120, members=3, consented="0.5", queries=3, stdout=out)
    text = out.getvalue()
    assert "Load average before measuring" in text
    # Which processor the figures come from (they move with it).
    assert re.search(r"^\d+ CPUs: \S.*\. Load average before measuring", text, re.M), text
    assert "Measured after VACUUM of the shares following each consent change." in text
    assert "0.50" in text and "recall@k" in text
    # Both searches are scored against an exact reference (a number, not nan).
    for label in ("circle knn", "circle hybrid search"):
        assert re.search(rf"0\.50 {label}\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[01]\.\d{{3}}\s", text), text
    circle = Circle.objects.get(name="Bench circle")
    assert MemoryShare.objects.filter(circle=circle).count() == 120
    assert circle.memberships.count() == 3


def test_bench_circles_says_when_it_measures_right_after_the_change():
    out = StringIO()
    call_command(
        "bench_circles",
        memories=300,
        shared=120,
        members=3,
        consented="0.9",
        queries=3,
        vacuum=False,
        stdout=out,
    )
    text = out.getvalue()
    assert "Measured right after each consent change: no vacuum of the shares (--no-vacuum)." in text
    assert re.search(r"0\.90 circle knn\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[01]\.\d{3}\s", text), text
