"""Timing and printing for every bench: timers, percentiles, recall, the machine and its load.

A figure without the load average beside it means little on a shared two-core
machine, so each bench prints load_average() before and after measuring.
"""

from __future__ import annotations

import os
import platform
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from django.db import connection

from config.gc_freeze import freeze_startup_objects


def load_average() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg()) + " (1, 5, 15 min)"


def cpu_count() -> int:
    """The CPUs this process may run on (what the machine lends the bench)."""
    return len(os.sched_getaffinity(0))


def machine() -> str:
    """The CPUs the bench runs on, by model: "2 CPUs: AMD EPYC 7B13 (AVX2)".

    Figures move with the processor as much as with the code: the same commit's searches
    measured 1.5-2 times slower on one session's Intel Xeon than on another's AMD EPYC,
    pgvector's own statements (the peers) included. A figure is compared with another
    measured on the same model, or by its ratio to the peers measured in the same run.
    """
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                name, _, value = line.partition(":")
                name = name.strip()
                if name == "model name" and not model:
                    model = " ".join(value.split())
                elif name == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "unknown processor"
    vectors = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else ""
    return f"{cpu_count()} CPUs: {model}" + (f" ({vectors})" if vectors else "")


def server_versions() -> str:
    """The PostgreSQL and pgvector versions the figures were measured on."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
        version, pgvector_version = cursor.fetchone()
    return f"{version.split(' on ')[0]}, pgvector {pgvector_version}"


def percentile(values: Sequence[float], percent: float) -> float:
    return float(np.percentile(np.array(values), percent)) if len(values) else float("nan")


def recall(results: Sequence[Sequence], truth: Sequence[Sequence]) -> float:
    """The share of the reference's answers found, summed over every query (1 where it has none)."""
    found = sum(len(set(got) & set(want)) for got, want in zip(results, truth, strict=True))
    expected = sum(len(want) for want in truth)
    return found / expected if expected else 1.0


@dataclass
class Measured:
    latencies_ms: list[float]
    returned: list[int]
    results: list[list[uuid.UUID]]


def measure(run: Callable[[np.ndarray], list], queries: Sequence) -> Measured:
    """`run` on each query in turn, timed one by one."""
    # As the servers do once started (config/gc_freeze.py): without it one query in a
    # hundred or two also paid a 40–60 ms full garbage collection.
    freeze_startup_objects()
    measured = Measured([], [], [])
    for query in queries:
        started = time.perf_counter()
        ids = run(query)
        measured.latencies_ms.append((time.perf_counter() - started) * 1000)
        measured.returned.append(len(ids))
        measured.results.append(ids)
    return measured


def latency_recall_header(percents: tuple[float, ...] = (50, 95, 99)) -> str:
    """The heads of latency_recall_columns."""
    latencies = " ".join(f"{f'p{percent:g} ms':>8}" for percent in percents)
    return f"{latencies} {'recall@k':>9} {'rows/asked':>11}"


def latency_recall_columns(
    measured: Measured, truth: Measured | None, asked: int, percents: tuple[float, ...] = (50, 95, 99)
) -> str:
    """p50/p95/p99 ms, recall@k against `truth` (nan without one) and rows returned of those asked."""
    found = float("nan") if truth is None else recall(measured.results, truth.results)
    latencies = " ".join(f"{percentile(measured.latencies_ms, percent):8.2f}" for percent in percents)
    rows = f"{np.mean(measured.returned):.1f}/{asked}"
    return f"{latencies} {found:9.3f} {rows:>11}"
