"""An import's memories are embedded in batches on the bulk queue by a real worker, with progress shown.

The import page says "Indexing N of M" and the timeline carries a quiet note
while the memories wait; both go once the worker has embedded them. A memory
typed in meanwhile is embedded on the default queue without waiting for the
backlog.
"""

from __future__ import annotations

import base64
import json
import re

import pytest
import redis
from django.urls import reverse

from memories.models import Memory
from memories.services import memory_create
from portability.models import ImportedItem, ImportJob, ImportStatus
from portability.services import import_run, import_start
from tests.memories import test_worker as worker_test
from tests.memories.test_worker import all_done, wait_until, worker, worker_broker  # noqa: F401 — fixtures
from tests.portability.test_jobs import _dayone

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ENTRIES = 200
BULK_BATCH = 64
NOTE = "still being indexed — search finds them by words meanwhile"


@pytest.fixture(autouse=True)
def _own_queues(monkeypatch):
    # Queues of our own: a worker left from another test must not take our tasks.
    monkeypatch.setattr(worker_test, "WORKER_TEST_QUEUE", "keepsake-indexing-test")
    monkeypatch.setattr(worker_test, "WORKER_TEST_BULK_QUEUE", "keepsake-indexing-test-bulk")


def queued(client: redis.Redis, queue: str) -> list[tuple[str, list]]:
    messages = [json.loads(raw) for raw in reversed(client.lrange(queue, 0, -1))]
    return [
        (message["headers"]["task"], json.loads(base64.b64decode(message["body"]))[0]) for message in messages
    ]


def task_lines(log: str, event: str) -> list[tuple[int, str]]:
    """(line number, task name) of every `Task <name>[id] <event>` line in a worker log."""
    found = []
    for number, line in enumerate(log.splitlines()):
        match = re.search(r"Task ([\w.]+)\[[0-9a-f-]+\] " + event, line)
        if match:
            found.append((number, match.group(1)))
    return found


def test_import_is_indexed_in_batches_on_the_bulk_queue_and_the_pages_say_how_far(
    alice,
    worker,  # noqa: F811
    worker_broker,  # noqa: F811
    client,
    settings,
):
    settings.MEMORY_EMBEDDINGS_BULK_BATCH_SIZE = BULK_BATCH
    client.force_login(alice)
    job = import_start(owner=alice, filename="journal.json", content=_dayone(ENTRIES))
    # The import itself runs here, so the queues can be read before any worker takes from them.
    assert import_run(job_id=job.pk) is False
    assert ImportJob.objects.get(pk=job.pk).status == ImportStatus.DONE
    imported = {
        str(memory_id)
        for memory_id in ImportedItem.objects.filter(job_id=job.pk).values_list("object_id", flat=True)
    }
    assert len(imported) == ENTRIES

    broker = redis.Redis.from_url(worker_broker)
    bulk = queued(broker, worker_test.WORKER_TEST_BULK_QUEUE)
    assert {name for name, _ in bulk} == {"memories.embed_bulk"}
    assert all(len(args[0]) <= BULK_BATCH for _, args in bulk)
    assert sorted(memory_id for _, args in bulk for memory_id in args[0]) == sorted(imported)
    # Nothing per memory on the default queue: only the import's own run.
    default = queued(broker, worker_test.WORKER_TEST_QUEUE)
    assert {name for name, _ in default} == {"portability.import_job_run"}

    job_page = reverse("import_job_detail", kwargs={"job_id": job.pk})
    page = client.get(job_page).content.decode()
    assert f"Indexing 0 of {ENTRIES}" in page
    fragment = client.get(job_page, HTTP_HX_REQUEST="true").content.decode()
    assert f"Indexing 0 of {ENTRIES}" in fragment and 'hx-trigger="every 3s"' in fragment
    assert f"{ENTRIES} memories are {NOTE}" in client.get(reverse("timeline")).content.decode()

    worker.start()
    wait_until(
        lambda: Memory.objects.filter(owner=alice, embedded_at__isnull=False).exists(),
        what="the worker to embed the first batch",
    )
    # Saved by hand while the backlog is being worked through.
    typed = memory_create(owner=alice, body="Typed in while the import was being indexed")
    partway = re.search(rf"Indexing (\d+) of {ENTRIES}", client.get(job_page).content.decode())
    if partway is not None:  # else already through: a quiet machine is quick
        assert 0 < int(partway.group(1)) < ENTRIES

    everything = [*imported, str(typed.pk)]
    wait_until(lambda: all_done(everything), what="every memory embedded, with its edges")

    done = client.get(job_page, HTTP_HX_REQUEST="true").content.decode()
    assert f"All {ENTRIES} imported memories are indexed" in done
    assert "Indexing" not in done and "hx-trigger" not in done  # nothing left to poll for
    assert NOTE not in client.get(reverse("timeline")).content.decode()

    log = worker.log_path.read_text()
    succeeded = task_lines(log, "succeeded")
    names = [name for _, name in succeeded]
    # The import's memories were embedded by batch tasks, never one task each.
    assert names.count("memories.embed_bulk") == len(bulk)
    assert names.count("memories.refresh_memories") == 1  # the memory typed in by hand
    # Which the worker took before the backlog was through: the queues are taken in turn.
    typed_done = next(number for number, name in succeeded if name == "memories.refresh_memories")
    last_bulk = max(number for number, name in succeeded if name.endswith("_bulk"))
    assert typed_done < last_bulk
    # The pool process loaded the model before its first task, and said so.
    loaded = next(
        number
        for number, line in enumerate(log.splitlines())
        if "Embedding model all-MiniLM-L6-v2 (" in line and ") loaded in the worker process" in line
    )
    assert loaded < succeeded[0][0]
