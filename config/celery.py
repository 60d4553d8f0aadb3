from __future__ import annotations

import os

from celery import Celery
from celery.signals import celeryd_init, worker_process_init
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("keepsake")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Embedding after an import (and the sweep's catching up) is bulk work with a
# queue of its own, so interactive work (a memory just saved, an import run,
# the beat's tasks) never waits behind a backlog: a worker consuming both takes
# from them in turn, one message at a time (prefetch 1). The tasks named here
# go there; an explicit queue= on a publish wins.
BULK_TASKS = frozenset({"memories.embed_bulk", "memories.compute_edges_bulk"})


def route_task(name: str, args, kwargs, options, task=None, **rest) -> dict | None:
    from django.conf import settings

    if name in BULK_TASKS:
        return {"queue": settings.MEMORY_EMBEDDINGS_BULK_QUEUE}
    return None


app.conf.task_routes = (route_task,)


@celeryd_init.connect
def _consume_both_queues(conf, **kwargs) -> None:
    # A worker started without --queues consumes both (make run and docker-compose
    # name them anyway): a bare `celery worker` must not leave imports unindexed.
    from django.conf import settings

    conf.task_queues = tuple(
        # Each bound to its own name, as Celery declares a queue a route names.
        Queue(name, Exchange(name), routing_key=name)
        for name in (settings.CELERY_TASK_DEFAULT_QUEUE, settings.MEMORY_EMBEDDINGS_BULK_QUEUE)
    )


# The pool waits this long for a new child to report in; the child loads the
# embedding model first (below), which takes seconds, not Celery's default 4.
app.conf.worker_proc_alive_timeout = 300


@worker_process_init.connect
def _load_embedding_model(**kwargs) -> None:
    # In each pool process, before it takes a task: the first embedding task
    # (and the first user waiting on it) does not pay for the model load.
    from config.gc_freeze import freeze_startup_objects
    from memories.embeddings import warm_up

    warm_up(process="worker")
    freeze_startup_objects()  # as the web workers do: config/gc_freeze.py
