"""bench_footprint starts the whole stack and reports each process's memory (slow: a bench).

Run with `pytest -m bench tests/benchmarks/test_bench_footprint.py`; it starts
`config.embedded run` (web, worker, beat) against the running embedded services.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = [pytest.mark.bench, pytest.mark.django_db]


def test_bench_footprint_reports_every_process_of_the_stack():
    out = StringIO()
    call_command("bench_footprint", settle=2, stdout=out)
    text = out.getvalue()
    for role in ("web (gunicorn)", "worker", "beat", "PostgreSQL", "Valkey"):
        row = re.search(rf"^{re.escape(role)}\s+(\d+)\s+(\d+)\s+(\d+)$", text, re.MULTILINE)
        assert row is not None, (role, text)
        assert int(row[1]) >= 1 and int(row[2]) > 0
    assert re.search(r"Whole stack at rest: [0-9.]+ GiB PSS", text)
