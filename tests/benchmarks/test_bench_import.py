"""Benchmark: how fast a large Day One file imports, batch by batch, in-process.

Run with: TEST_DATABASE_NAME=... .venv/bin/python -m pytest tests/benchmarks/test_bench_import.py -m bench -s
Prints figures; asserts only correctness, never time.
"""

from __future__ import annotations

import json
import time

import pytest

from memories.models import Memory
from portability.selectors import export_json, export_markdown_zip
from portability.services import import_run, import_start

ENTRIES = 3000


@pytest.mark.bench
def test_bench_dayone_import_and_export(alice):
    entries = [
        {
            "uuid": f"{index:032X}",
            "creationDate": f"20{10 + index % 14}-0{1 + index % 9}-1{index % 10}T08:00:00Z",
            "text": f"# Day {index}\n\nWalked {index % 17} km along the river and met a neighbour.",
            "tags": ["event"] if index % 5 == 0 else [],
        }
        for index in range(ENTRIES)
    ]
    content = json.dumps({"metadata": {"version": "1.0"}, "entries": entries}).encode()
    started = time.perf_counter()
    job = import_start(owner=alice, filename="big.json", content=content)
    validated = time.perf_counter()
    import_run(job_id=job.pk)
    imported = time.perf_counter()
    assert Memory.objects.filter(owner=alice).count() == ENTRIES
    export_json(owner=alice)
    exported = time.perf_counter()
    export_markdown_zip(owner=alice)
    zipped = time.perf_counter()
    print(
        f"\n{ENTRIES} Day One entries ({len(content) / 1024:.0f} KB): validate {validated - started:.2f}s, "
        f"import {imported - validated:.2f}s ({ENTRIES / (imported - validated):.0f} entries/s), "
        f"JSON export {exported - imported:.2f}s, Markdown ZIP {zipped - exported:.2f}s"
    )
