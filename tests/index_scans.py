"""The HNSW index paths without their scan budgets: for tests that check what passes the gate.

The test database's HNSW indexes keep the entries of every row an earlier test or
Hypothesis example rolled back (nothing vacuums between tests). pgvector ends an
iterative scan at hnsw.max_scan_tuples visited entries or when its memory passes
hnsw.scan_mem_multiplier x work_mem, and dead entries count against both: measured,
a graph holding 60,000 rolled-back vectors and 3 live ones gave LIMIT 3 back 0-2 rows
at the default memory bound and all 3 at a hundred times it. How far a scan may go is
bench_retrieval's subject; here it must not make a result depend on test order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

from memories.search import settings as search_settings

UNBOUNDED = {
    "ANN_MAX_SCAN_TUPLES": 1_000_000,
    "OPEN_ANN_MAX_SCAN_TUPLES": 1_000_000,
    "CIRCLE_ANN_MAX_SCAN_TUPLES": 1_000_000,
    "ANN_SCAN_MEM_MULTIPLIER": 1_000,  # pgvector's ceiling
}


# The memory bound is hnsw.scan_mem_multiplier x work_mem: at pgvector's ceiling for the
# multiplier and the server's default work_mem (4 MB), a scan through the dead entries of
# a hundred rolled-back examples still came back empty now and then (1 in ~300 examples of
# the owner's index path, under load). The test's own connection gets more work_mem too.
UNBOUNDED_WORK_MEM = "256MB"


@contextlib.contextmanager
def unbounded_index_scans() -> Iterator[None]:
    from django.db import DatabaseError, connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('work_mem')")
        (work_mem,) = cursor.fetchone()
        cursor.execute("SELECT set_config('work_mem', %s, false)", [UNBOUNDED_WORK_MEM])
    try:
        with contextlib.ExitStack() as stack:
            for name, value in UNBOUNDED.items():
                stack.enter_context(mock.patch.object(search_settings, name, value))
            yield
    finally:
        # In a test's transaction the setting goes with its rollback anyway; in a transactional
        # test (autocommit) it is put back here. An aborted transaction takes it back itself.
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('work_mem', %s, false)", [work_mem])


def planned_as_on_a_big_table(sql: str, params: list, *, vacuum: str) -> tuple[list[tuple[str, str]], str]:
    """EXPLAIN ANALYZE of `sql` after VACUUM (ANALYZE) of the table `vacuum` (the visibility map,
    as autovacuum leaves it), with sequential and bitmap scans off: plans as on a big table, where
    a test's few pages would be read at once by a scan of any kind. The (node type, index name) of
    each index scan, and the plan as JSON text."""
    import json
    import re

    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {vacuum}")
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_bitmapscan = off")
        try:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            (plan,) = cursor.fetchone()
        finally:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")
    plan = json.dumps(json.loads(plan) if isinstance(plan, str) else plan)
    return re.findall(r'"Node Type": "([^"]*Scan)"[^{}]*?"Index Name": "([^"]*)"', plan), plan
