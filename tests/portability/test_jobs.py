from __future__ import annotations

import json

import pytest

from memories.models import Memory
from portability import services
from portability.models import ImportJob, ImportStatus
from portability.services import BATCH_SIZE, import_resume, import_run, import_start
from portability.tasks import import_job_run


def _dayone(count: int) -> bytes:
    entries = [
        {
            "uuid": f"{index:032X}",
            "creationDate": f"2020-01-{1 + index % 28:02d}T10:{index % 60:02d}:00Z",
            "text": f"Entry number {index}: a walk in the park.",
            "tags": [],
            "starred": False,
            "timeZone": "Europe/Paris",
        }
        for index in range(count)
    ]
    return json.dumps({"metadata": {"version": "1.0"}, "entries": entries}).encode()


ENTRIES = BATCH_SIZE * 2 + 50


def _bodies(owner) -> list[str]:
    return list(Memory.objects.filter(owner=owner).values_list("body", flat=True))


def test_progress_is_committed_batch_by_batch(alice):
    job = import_start(owner=alice, filename="big.json", content=_dayone(ENTRIES))
    assert (job.status, job.total, job.processed) == (ImportStatus.QUEUED, ENTRIES, 0)
    assert import_run(job_id=job.pk, max_batches=1) is True
    job.refresh_from_db()
    assert (job.status, job.processed, job.imported) == (ImportStatus.RUNNING, BATCH_SIZE, BATCH_SIZE)
    assert job.percent == BATCH_SIZE * 100 // ENTRIES
    assert Memory.objects.filter(owner=alice).count() == BATCH_SIZE
    assert import_run(job_id=job.pk) is False
    job.refresh_from_db()
    assert (job.status, job.processed, job.imported, job.percent) == (
        ImportStatus.DONE,
        ENTRIES,
        ENTRIES,
        100,
    )
    assert job.finished_at is not None


def test_crash_mid_batch_then_resume_imports_each_entry_exactly_once(alice, monkeypatch):
    job = import_start(owner=alice, filename="big.json", content=_dayone(ENTRIES))
    real_create = services.memory_create
    calls = {"n": 0}

    def crashing_create(**kwargs):
        calls["n"] += 1
        if calls["n"] == BATCH_SIZE + 30:  # in the middle of the second batch
            raise RuntimeError("worker lost")
        return real_create(**kwargs)

    monkeypatch.setattr(services, "memory_create", crashing_create)
    with pytest.raises(RuntimeError):
        import_job_run(str(job.pk))
    job.refresh_from_db()
    assert job.status == ImportStatus.FAILED
    assert "resume" in job.error
    assert job.processed == BATCH_SIZE  # the half-done batch was rolled back
    assert Memory.objects.filter(owner=alice).count() == BATCH_SIZE

    monkeypatch.setattr(services, "memory_create", real_create)
    import_resume(job=job)
    import_job_run(str(job.pk))
    job.refresh_from_db()
    assert job.status == ImportStatus.DONE
    bodies = _bodies(alice)
    assert len(bodies) == ENTRIES == len(set(bodies))


def test_job_left_running_by_a_dead_worker_continues_on_redelivery(alice):
    job = import_start(owner=alice, filename="big.json", content=_dayone(ENTRIES))
    import_run(job_id=job.pk, max_batches=2)
    # A killed worker leaves the job "running"; the broker redelivers the task.
    import_job_run(str(job.pk))
    job.refresh_from_db()
    assert job.status == ImportStatus.DONE
    bodies = _bodies(alice)
    assert len(bodies) == ENTRIES == len(set(bodies))


def test_finished_job_run_again_does_nothing(alice):
    job = import_start(owner=alice, filename="big.json", content=_dayone(30))
    import_run(job_id=job.pk)
    ImportJob.objects.filter(pk=job.pk).update(status=ImportStatus.QUEUED)
    assert import_run(job_id=job.pk) is False
    assert Memory.objects.filter(owner=alice).count() == 30


def test_recorded_items_are_never_imported_twice_even_if_the_counter_is_wrong(alice):
    job = import_start(owner=alice, filename="big.json", content=_dayone(ENTRIES))
    import_run(job_id=job.pk, max_batches=1)
    ImportJob.objects.filter(pk=job.pk).update(processed=0)
    import_run(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == ImportStatus.DONE
    bodies = _bodies(alice)
    assert len(bodies) == ENTRIES == len(set(bodies))


def test_failed_job_is_not_run_until_resumed(alice, monkeypatch):
    job = import_start(owner=alice, filename="small.json", content=_dayone(5))
    ImportJob.objects.filter(pk=job.pk).update(status=ImportStatus.FAILED)
    assert import_run(job_id=job.pk) is False
    assert not Memory.objects.filter(owner=alice).exists()


def test_resume_of_a_finished_job_is_refused(alice):
    from django.core.exceptions import ValidationError

    job = import_start(owner=alice, filename="small.json", content=_dayone(3))
    import_run(job_id=job.pk)
    job.refresh_from_db()
    with pytest.raises(ValidationError):
        import_resume(job=job)


def test_time_budget_hands_over_to_a_new_task(alice, monkeypatch):
    queued = []
    monkeypatch.setattr(services, "_enqueue_import", lambda job_id: queued.append(str(job_id)))
    monkeypatch.setattr("portability.tasks.RUN_BUDGET_SECONDS", 0)
    job = import_start(owner=alice, filename="big.json", content=_dayone(ENTRIES))
    import_job_run(str(job.pk))
    job.refresh_from_db()
    assert job.processed == BATCH_SIZE  # one batch, then the budget is spent
    assert queued == [str(job.pk)]


def test_upload_enqueues_the_job_after_commit(alice, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr(
        "portability.tasks.import_job_run.apply_async", lambda args, **kw: queued.append(args)
    )
    with django_capture_on_commit_callbacks(execute=True):
        job = import_start(owner=alice, filename="small.json", content=_dayone(2))
    assert queued == [(str(job.pk),)]
