"""Python's garbage collector in the long-running server processes (web, worker).

A loaded process holds ~100,000 objects that live as long as it does: Django's
settings, models, URL map and templates, DRF's serializers, the embedding model's
Python side. CPython's oldest-generation collection walks every one of them, and
it runs every few hundred requests: measured 42–62 ms in one pause (2026-11-26, a
process with the app loaded; gc callbacks around 100 circle searches and 100
circle timeline pages), so the request it lands on takes that much longer — the
circle timeline's ~50 ms p99 in `bench_circles` was that pause.

`gc.freeze()` moves everything alive once the process has started into a
permanent generation the collector no longer walks (CPython docs, gc.freeze). The
pauses go (the same 200 requests: no oldest-generation collection, slowest
timeline page 18 ms instead of 76 ms); reference counting still frees
everything, and cycles made after the start are still collected.
"""

from __future__ import annotations

import gc


def freeze_startup_objects() -> int:
    """Collect what starting left behind, then freeze the rest. Returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
