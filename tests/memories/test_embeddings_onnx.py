"""The ONNX Runtime backend against PyTorch's vectors, with the real model.

The servers compute embeddings from the ONNX export (no torch); a checkout
without the export falls back to PyTorch. Both must put every text at the same
place, or search would rank differently depending on how Keepsake was installed.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memories import embedding_export, embeddings
from memories.models import Memory
from memories.retrieval import memory_search

# One pytest-xdist worker runs the whole module: the encoders load once.
pytestmark = pytest.mark.xdist_group("embeddings_onnx")

MORE_TEXTS = [
    "puppy playing fetch",
    "Our dog chased the ball across the beach",
    "Filed the quarterly tax return paperwork",
    "Mum's 70th: cake, candles, the whole family on Zoom from three countries",
    "Ich habe heute mit Oma Kuchen gebacken.",
    "",
    "a",
    "12:45 train to Leeds, delayed 40 min",
]


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory) -> Path:
    """The export the servers use, or (on a checkout without it) a fresh one made the same way."""
    if embeddings.ONNX_PATH.exists():
        return embeddings.ONNX_PATH
    return embedding_export.embedding_model_export(path=tmp_path_factory.mktemp("onnx") / "model.onnx").path


@pytest.fixture(scope="module")
def onnx_encoder(onnx_path) -> embeddings.OnnxEncoder:
    return embeddings.OnnxEncoder(onnx_path, threads=1)


@pytest.fixture(scope="module")
def torch_encoder():
    return embeddings.load_encoder("torch", threads=1)


def test_onnx_vectors_match_pytorch_on_varied_texts(onnx_encoder, torch_encoder):
    texts = [*embedding_export.SAMPLE_TEXTS, *MORE_TEXTS]
    exported, reference = onnx_encoder.encode(texts), torch_encoder.encode(texts)

    assert exported.shape == reference.shape == (len(texts), 384)
    assert exported.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(exported, axis=1), 1.0, atol=1e-5)
    cosines = (exported * reference).sum(axis=1)
    assert cosines.min() >= embedding_export.MIN_COSINE, dict(zip(texts, cosines.round(4), strict=True))


def test_onnx_reads_256_tokens_as_sentence_transformers_does(onnx_encoder, torch_encoder):
    # tokenizer.json says 128; the model reads 256. A difference after token ~150
    # must change the vector, one after token 256 must not.
    opening = " ".join(["river"] * 150)
    texts = [
        f"{opening} and then the storm came",
        f"{opening} and then the picnic began",
        f"{opening} {'stone ' * 120} one ending",
        f"{opening} {'stone ' * 120} another ending entirely",
    ]
    exported = onnx_encoder.encode(texts)

    assert float(exported[0] @ exported[1]) < 0.9999
    np.testing.assert_allclose(exported[2], exported[3], atol=1e-6)
    assert ((exported * torch_encoder.encode(texts)).sum(axis=1) >= embedding_export.MIN_COSINE).all()


def test_sorting_by_length_gives_each_text_back_its_own_vector(onnx_encoder):
    texts = [f"Memory {n} " + "about the seaside and the gulls " * (n % 7) for n in range(70)]

    batched = onnx_encoder.encode(texts)
    alone = np.array([onnx_encoder.encode([texts[n]])[0] for n in (0, 6, 33, 69)])

    np.testing.assert_allclose(batched[[0, 6, 33, 69]], alone, atol=1e-5)


@pytest.mark.django_db
def test_search_ranks_the_same_whichever_backend_embedded(alice, onnx_encoder, torch_encoder):
    bodies = [
        "Our dog chased the ball across the beach",
        "Rex fetched sticks in the park all afternoon",
        "Filed the quarterly tax return paperwork",
        "Grandma taught me to bake bread on Sundays",
        "The cat slept on the warm windowsill",
        "Booked the dentist for next Tuesday",
    ]
    memories = [Memory.objects.create(owner=alice, body=body) for body in bodies]
    queries = ["puppy playing fetch", "baking with family", "appointments", "pets"]

    def rankings(encoder) -> list[list]:
        for memory, vector in zip(memories, encoder.encode(bodies), strict=True):
            Memory.objects.filter(pk=memory.pk).update(embedding=vector)
        return [
            [
                hit.memory.pk
                for hit in memory_search(
                    alice, query, respect_consent=True, query_embedding=encoder.encode([query])[0].tolist()
                )
            ]
            for query in queries
        ]

    with_onnx, with_torch = rankings(onnx_encoder), rankings(torch_encoder)

    assert with_onnx == with_torch
    assert with_onnx[0][0] in (memories[0].pk, memories[1].pk)


def test_missing_export_falls_back_to_pytorch_and_says_so(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(embeddings, "ONNX_PATH", tmp_path / "absent.onnx")

    with caplog.at_level(logging.WARNING, logger="memories.embeddings"):
        encoder = embeddings.load_encoder(threads=1)

    assert encoder.backend == "torch"
    assert "No ONNX export" in caplog.text and "export_embedding_model" in caplog.text


def test_thread_count_comes_from_the_setting(monkeypatch, onnx_path):
    monkeypatch.setenv("KEEPSAKE_EMBEDDING_THREADS", "2")
    assert embeddings.embedding_threads() == 2
    monkeypatch.delenv("KEEPSAKE_EMBEDDING_THREADS")
    assert embeddings.embedding_threads() == embeddings.DEFAULT_THREADS


def test_servers_warm_up_without_importing_torch(onnx_path):
    # What a web or worker process does at start: load the app, then warm_up.
    script = (
        "import django, sys; django.setup(); import config.urls;"
        "from memories import embeddings;"
        f"embeddings.ONNX_PATH = __import__('pathlib').Path({str(onnx_path)!r});"
        "assert embeddings.warm_up(process='test');"
        "print(embeddings.backend(), 'torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.stdout.split() == ["onnx", "False"]


def test_install_and_the_image_export_the_model_and_git_ignores_it():
    root = Path(__file__).resolve().parents[2]
    makefile = (root / "Makefile").read_text()
    install_rule = makefile.split("$(STAMP): requirements.txt", 1)[1].split("\n\n", 1)[0]

    assert "manage.py export_embedding_model" in install_rule
    assert "manage.py export_embedding_model" in (root / "Dockerfile").read_text()
    assert ".models/" in (root / ".gitignore").read_text().splitlines()
    assert embeddings.ONNX_PATH.parent == root / ".models"


def test_the_int8_variant_multiplies_int8_weights_in_blocks_batch_independently(tmp_path, torch_encoder):
    import onnx

    result = embedding_export.embedding_model_export(path=tmp_path / "int8.onnx", variant="int8")
    graph = onnx.load(str(result.path)).graph
    quantized = [node for node in graph.node if node.op_type == "MatMulNBits"]
    weights = {initializer.name for initializer in graph.initializer}
    asked = ("accuracy_level", "bits", "block_size")
    settings = {tuple(sorted((a.name, a.i) for a in node.attribute if a.name in asked)) for node in quantized}
    encoder = embeddings.OnnxEncoder(result.path, threads=1)

    assert result.variant == encoder.variant == "int8"
    # 6 layers: query, key, value, attention output, feed-forward in and out; no
    # float MatMul by a stored weight is left (the attention's own products remain).
    assert len(quantized) == 36
    assert settings == {(("accuracy_level", 4), ("bits", 8), ("block_size", embedding_export.QUANT_BLOCK))}
    assert not [node for node in graph.node if node.op_type == "MatMul" and set(node.input) & weights]
    texts = [*embedding_export.SAMPLE_TEXTS, *MORE_TEXTS]
    batched = encoder.encode(texts)
    assert ((batched * torch_encoder.encode(texts)).sum(axis=1) >= embedding_export.MIN_COSINE).all()
    # Each token's activations are quantised on their own: padding in a batch changes nothing.
    alone = np.array([encoder.encode([texts[n]])[0] for n in (0, 3, 11, 19)])
    np.testing.assert_allclose(batched[[0, 3, 11, 19]], alone, atol=1e-5)
