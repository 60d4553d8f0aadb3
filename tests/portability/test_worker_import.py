"""An import run by a real Celery worker, killed mid-import, then resumed: every entry exactly once."""

from __future__ import annotations

import pytest

from memories.models import Memory
from portability.models import ImportJob, ImportStatus
from portability.services import import_resume, import_start
from tests.memories import test_worker as worker_test
from tests.memories.test_worker import wait_until, worker, worker_broker  # noqa: F401 — fixtures
from tests.portability.test_jobs import _dayone

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _own_queues(monkeypatch):
    # Queues of our own: a worker left from another test must not take our tasks.
    monkeypatch.setattr(worker_test, "WORKER_TEST_QUEUE", "keepsake-import-worker-test")
    monkeypatch.setattr(worker_test, "WORKER_TEST_BULK_QUEUE", "keepsake-import-worker-test-bulk")


ENTRIES = 1000


def _job(job_id) -> ImportJob:
    return ImportJob.objects.defer("payload").get(pk=job_id)


def test_worker_killed_mid_import_resumes_without_duplicates(alice, worker):  # noqa: F811
    worker.start()
    job = import_start(owner=alice, filename="big.json", content=_dayone(ENTRIES))
    wait_until(lambda: _job(job.pk).processed >= 100, what="the worker to commit a few batches")
    worker.kill()
    stopped_at = _job(job.pk)
    assert stopped_at.processed < ENTRIES, "the import finished before the worker could be killed"
    assert stopped_at.status == ImportStatus.RUNNING  # a dead worker cannot say goodbye
    assert Memory.objects.filter(owner=alice).count() == stopped_at.processed
    print(f"Killed at {stopped_at.processed}/{ENTRIES}.")

    # The restarted worker takes the resumed import and the embedding batches of
    # the memories imported so far (bulk queue) in turn.
    worker.start()
    import_resume(job=stopped_at)  # the owner's "Resume" button
    wait_until(lambda: _job(job.pk).status == ImportStatus.DONE, what="the resumed import to finish")
    bodies = list(Memory.objects.filter(owner=alice).values_list("body", flat=True))
    assert len(bodies) == ENTRIES == len(set(bodies))
    assert (_job(job.pk).processed, _job(job.pk).imported) == (ENTRIES, ENTRIES)
