"""gunicorn settings for the web server: `-c python:config.gunicorn` (make run, docker-compose).

Each gunicorn worker loads the embedding model after loading the app and before
it takes its first request, so the first search or chat after a start does not
pay for it (seconds on a small machine), then freezes what it loaded out of the
garbage collector's walk (config/gc_freeze.py), and shortens how long a thread
back from the database waits for the Python lock (gil_switch_interval). The
flags on the command lines stay where they are; only the hook lives here.
"""

from __future__ import annotations

import os
import sys

# Python's own interval is 5 ms: a thread whose database round trip has returned
# waits up to that long while another request's thread runs Python, and a search
# makes about ten round trips. 1 ms measured shorter tails under load (bench_load,
# 50 clients, five alternating pairs of runs: search p95 40-48 ms against 40-58,
# p99 52-69 against 60-122; README, "Load").
DEFAULT_SWITCH_INTERVAL_MS = 1.0


def gil_switch_interval() -> float:
    """Seconds for sys.setswitchinterval, from KEEPSAKE_WEB_SWITCH_INTERVAL_MS (0.1-100 ms)."""
    raw = os.environ.get("KEEPSAKE_WEB_SWITCH_INTERVAL_MS", "").strip()
    if not raw:
        return DEFAULT_SWITCH_INTERVAL_MS / 1000
    try:
        milliseconds = float(raw)
    except ValueError:
        raise SystemExit(
            f"KEEPSAKE_WEB_SWITCH_INTERVAL_MS must be a number of milliseconds, not {raw!r}."
        ) from None
    if not 0.1 <= milliseconds <= 100:
        raise SystemExit(f"KEEPSAKE_WEB_SWITCH_INTERVAL_MS must be between 0.1 and 100, not {raw}.")
    return milliseconds / 1000


def on_starting(server) -> None:
    # In the master, before any worker starts: a wrong value stops the server with its
    # message (raised in a worker, gunicorn would only start the worker again and again).
    gil_switch_interval()


def post_worker_init(worker) -> None:
    # Django is set up by now (the worker has loaded config.wsgi), logging included.
    from config.gc_freeze import freeze_startup_objects
    from memories.embeddings import warm_up

    sys.setswitchinterval(gil_switch_interval())
    warm_up(process="web")
    # Everything loaded so far lives as long as the worker: out of the collector's walk.
    freeze_startup_objects()
