"""gunicorn settings for the web server: `-c python:config.gunicorn` (make run, docker-compose).

Each gunicorn worker loads the embedding model after loading the app and before
it takes its first request, so the first search or chat after a start does not
pay for it (seconds on a small machine). The flags on the command lines stay
where they are; only the hook lives here.
"""

from __future__ import annotations


def post_worker_init(worker) -> None:
    # Django is set up by now (the worker has loaded config.wsgi), logging included.
    from memories.embeddings import warm_up

    warm_up(process="web")
