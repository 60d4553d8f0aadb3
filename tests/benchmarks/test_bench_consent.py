"""bench_consent runs end to end on a tiny world and prints its figures (a smoke test, not a measurement).

Transactional: the command vacuums and rebuilds the agents' index, which a test
transaction would not allow.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from memories.models import Memory, MemoryGate

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_consent_prints_flip_times_and_the_index_after_a_bulk_revoke():
    out = StringIO()
    call_command("bench_consent", memories=300, sizes="5,40", rounds=1, queries=5, stdout=out)
    text = out.getvalue()

    for size, label in (
        ("5", "withhold"),
        ("40", "grant (old entries vacuumed)"),
        ("40", "grant right after"),
    ):
        assert any(line.split()[:1] == [size] and label in line for line in text.splitlines()), (size, label)
    # A 300-memory owner is searched exactly: recall is 1 in every state, and the
    # revoked person's 40 memories are missing from no answer they belong in.
    states = [
        line for line in text.splitlines() if line.startswith(("all granted", "right after", "after VACUUM"))
    ]
    assert len(states) == 5
    assert all(line.split()[-2] == "1.000" for line in states), states
    assert "dead gate rows; autovacuum starts" in text
    # Everyone is granted again at the end, every memory open.
    owner_memories = Memory.objects.filter(owner__username="bench_consent")
    assert MemoryGate.objects.filter(memory__in=owner_memories, blocked_count=0).count() == 300
    # ... and in the agents' index: the bench ran the indexing task after each grant.
    assert not MemoryGate.objects.filter(memory__in=owner_memories, indexed=False).exists()
    call_command("bench_consent", clean=True, stdout=StringIO())
    assert not owner_memories.exists()
