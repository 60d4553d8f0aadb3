"""gunicorn settings for the web server: `-c python:config.gunicorn` (make run, docker-compose).

Each gunicorn worker loads the embedding model after loading the app and before
it takes its first request, so the first search or chat after a start does not
pay for it (seconds on a small machine), then freezes what it loaded out of the
garbage collector's walk (config/gc_freeze.py). The flags on the command lines stay
where they are; only the hook lives here.
"""

from __future__ import annotations


def post_worker_init(worker) -> None:
    # Django is set up by now (the worker has loaded config.wsgi), logging included.
    from config.gc_freeze import freeze_startup_objects
    from memories.embeddings import warm_up

    warm_up(process="web")
    # Everything loaded so far lives as long as the worker: out of the collector's walk.
    freeze_startup_objects()
