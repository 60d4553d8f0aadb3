"""bench_import runs end to end on a tiny import and prints its figures (a smoke test, not a measurement)."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from benchmarks.management.commands.bench_import import OWNER, dayone_export
from config.celery import app
from memories.models import Memory
from tests.conftest import SECOND_OWN_DB, broker_url_with_db, suite_redis_db

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_generated_file_is_a_day_one_export_with_names_and_tags():
    entries = json.loads(dayone_export(entries=30, seed=7))["entries"]
    assert len(entries) == 30 and len({entry["uuid"] for entry in entries}) == 30
    assert all(entry["text"].startswith("# ") and entry["tags"] for entry in entries)
    assert any(len(entry["tags"]) > 1 for entry in entries)


def test_bench_import_makes_every_entry_searchable_prints_each_stage_and_cleans_up():
    out, eager_before = StringIO(), app.conf.task_always_eager
    call_command("bench_import", entries=30, progress=0.5, stdout=out)
    text = out.getvalue()

    assert "tasks run eagerly in this process" in text
    vacuumed = r"^vacuumed what earlier runs deleted in [0-9.]+s \(before the clock\)$"
    assert re.search(vacuumed, text, re.MULTILINE), text
    for stage in ("parsing", "saving", "embedding", "edges"):
        assert re.search(rf"^  {stage}: +\d+ entries/s", text, re.MULTILINE), text
    assert re.search(r"^import: Done, 30 imported, 0 skipped$", text, re.MULTILINE), text
    assert "[30 memories embedded]" in text
    assert re.search(r"^fully searchable: 30 of 30 memories \(30 embedded\) in [0-9.]+s", text, re.MULTILINE)
    assert text.count("load ") >= 2 and "load after:" in text
    # Its own user and memories are gone, and the tasks are no longer eager.
    assert not get_user_model().objects.filter(username=OWNER).exists()
    assert not Memory.objects.filter(owner__username=OWNER).exists()
    assert app.conf.task_always_eager is eager_before


def test_bench_import_with_a_real_worker_waits_for_it_and_gives_each_stage_its_last_moment(settings):
    out, broker_before = StringIO(), app.conf.broker_url
    broker = broker_url_with_db(settings.REDIS_URL, suite_redis_db(SECOND_OWN_DB))
    # As earlier tests leave it: the app's connection pool open on the suite's broker.
    app.pool.acquire(block=True).release()
    call_command("bench_import", entries=30, progress=5, worker=1, broker=broker, timeout=240, stdout=out)
    text = out.getvalue()

    assert "a Celery worker of 1 process(es)" in text
    for stage in ("saved", "embedded", "edges"):
        assert re.search(rf"^  last {stage}: +[0-9.]+s \( *\d+ entries/s\)$", text, re.MULTILINE), text
    assert re.search(r"^import: Done, 30 imported, 0 skipped$", text, re.MULTILINE), text
    assert re.search(r"^fully searchable: 30 of 30 memories \(30 embedded\) in [0-9.]+s", text, re.MULTILINE)
    assert not get_user_model().objects.filter(username=OWNER).exists()
    assert app.conf.broker_url == broker_before
