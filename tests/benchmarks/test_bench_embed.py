"""bench_embed prints its figures, and compares the encoder with PyTorch's vectors."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command

from memories import embeddings
from memories.models import Memory

pytestmark = pytest.mark.django_db


@pytest.fixture
def own_model(monkeypatch):
    # The bench installs the encoder it measures as the process's model: put it back.
    monkeypatch.setattr(embeddings, "_model", embeddings._model)


def test_bench_embed_prints_throughput_latency_and_quality_and_leaves_nothing(own_model):
    if not embeddings.ONNX_PATH.exists():
        pytest.skip("no ONNX export: `make install` makes it")
    out = StringIO()
    call_command("bench_embed", n=8, one_by_one=2, queries=4, edges=0, quality=30, threads=1, stdout=out)
    text = out.getvalue()

    assert re.search(r"^batched: +8 memories in [0-9.]+s = \d+ memories/s", text, re.MULTILINE), text
    assert re.search(r"query embedding: 4 queries .* p50 [0-9.]+ ms, p95 [0-9.]+ ms", text), text
    quality = re.search(
        r"quality against PyTorch: cosine mean / min ([0-9.]+) / ([0-9.]+) on 30 texts, "
        r"([0-9.]+) / ([0-9.]+) on 100 queries; each query's 10 nearest texts: recall@10 ([0-9.]+)",
        text,
    )
    assert quality is not None, text
    # The shipped export is fp32: PyTorch's vectors, so the same neighbours.
    assert min(float(value) for value in quality.groups()[:4]) >= 0.9999
    assert float(quality[5]) == 1.0
    assert not Memory.objects.filter(owner__username__startswith="bench-embed-").exists()
