"""One thread for numpy's matrix products (OpenBLAS) in every Keepsake process.

A process's numpy work is small and on a request's path: ranking a kept copy of an
owner's open vectors (memories/open_vectors.py, ~10,000 x 384 against one query)
and pooling the embedding model's output. OpenBLAS splits such a product over every
core, and its threads then wait spinning for the next one: on a machine whose other
cores are busy (a web server's other requests, PostgreSQL) the product waits for a
core and the spinning takes one from the database. Measured on 2 cores, one of them
kept busy by another process (150 agents' searches at 90% gated, ranked on the copy):
p95 2.6-5.8 ms with one thread against 9.7-11.4 ms with two, and the SQL searches
alternating with them 6.3-8.4 ms against 10.0-12.8 (README, "Search and the consent
gate"). The embedding model keeps its own threads (KEEPSAKE_EMBEDDING_THREADS).
"""

from __future__ import annotations

import numpy  # noqa: F401 - loaded first, so its BLAS library is the one limited
from threadpoolctl import threadpool_limits

BLAS_THREADS = 1


def limit_blas_threads() -> None:
    """Limit the BLAS libraries loaded in this process to BLAS_THREADS threads, for good."""
    threadpool_limits(limits=BLAS_THREADS, user_api="blas")
