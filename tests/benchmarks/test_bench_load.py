"""bench_load starts the production web server and drives it with concurrent clients (a smoke test).

Not a measurement: the figures are for the README's Performance section and
tests never assert on time. Transactional, because the server is another
process and must see the seeded owner.
"""

from __future__ import annotations

import re
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from accounts.models import AccessToken
from benchmarks.management.commands.bench_load import MIXED_VECTORS_WARNING
from memories.embeddings import embed_text
from memories.models import Memory
from memories.services import _embedding_input

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_load_prints_each_endpoint_with_no_errors_and_cleans_up_its_writes(mallory):
    # Another benchmark's synthetic vectors in the same table: the run says what mixing costs them.
    Memory.objects.create(owner=mallory, body="synthetic", embedding_model="bench-random-words")
    out = StringIO()
    call_command("bench_load", clients=3, seconds=3, memories=120, think=0.05, warmup=1, stdout=out)
    text = out.getvalue()

    assert MIXED_VECTORS_WARNING in text, text

    assert "3 clients (each pausing 0.05 s on average between requests)" in text, text
    server = r"for \d+ s, after 1 s unmeasured, against gunicorn \(\d+ workers, \d+ threads each\)"
    assert re.search(server, text), text
    assert re.search(r"Throughput: [0-9.]+ requests/s; errors: 0 of [1-9][0-9]*", text), text
    assert re.search(r"The clients themselves used [0-9.]+ CPU-seconds \([0-9.]+ of a core\)", text), text
    for endpoint in ("agent search", "owner timeline", "memory write", "chat"):
        row = re.search(
            rf"^{endpoint}\s+(\d+)\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+0$", text, re.MULTILINE
        )
        assert row is not None, (endpoint, text)
    # The run's writes are removed; the seeded owner stays for reuse; its tokens are not left usable twice.
    assert not Memory.objects.filter(owner__username="bench_load", title="bench_load write").exists()
    assert Memory.objects.filter(owner__username="bench_load").count() == 120
    # Seeded with the real model's vectors (the default): a memory's vector is its text's.
    assert "the owner has 120 memories (embedded by the model)" in text, text
    seeded = Memory.objects.filter(owner__username="bench_load").order_by("created_at", "id").first()
    assert seeded.embedding_model == "bench-model-words"
    expected = embed_text(_embedding_input(title=seeded.title, body=seeded.body))
    assert float(np.dot(np.asarray(seeded.embedding), np.asarray(expected))) > 0.999
    assert AccessToken.objects.filter(owner__username="bench_load", revoked_at=None).count() == 2


def test_bench_load_refuses_nonsense_arguments():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--clients must be positive"):
        call_command("bench_load", clients=0, stdout=StringIO())
    with pytest.raises(CommandError, match="--warmup cannot be negative"):
        call_command("bench_load", warmup=-1, stdout=StringIO())
    with pytest.raises(CommandError, match="--think cannot be negative"):
        call_command("bench_load", think=-1, stdout=StringIO())
