"""Putting the gate rows a grant opened into the agents' vector index, off the request.

A grant opens every memory of the person at once. The triggers leave those gate
rows `indexed = false` (migration 0009), so the grant's transaction pays no insert
into memory_gate_open_hnsw (one per memory, nearly all of a grant's time before).
gate_rows_index_opened, run by the task memories.index_opened_gates, then sets
`indexed` on them in small batches; each update is that row's insert into the
index. Until then the agents' search finds the rows exactly, through
memory_gate_unindexed_idx (search.knn_open._unindexed_open_neighbours).

Nothing here decides what anyone may see: `indexed` only chooses the index a row
is found through, and the NOT EXISTS gate filters every agent result.
"""

from __future__ import annotations

import time

from django.db import connection, transaction

from memories.models import MemoryGate

# Rows per transaction. Each row costs one HNSW insert (~2-15 ms here, more on a busy
# machine), and a consent change touching a claimed row waits for the batch to commit:
# small batches keep a revocation that meets one waiting well under a second.
INDEX_BATCH_SIZE = 50


def gate_rows_index_opened(
    *, owner_id: int | None = None, batch_size: int | None = None, max_seconds: float | None = None
) -> tuple[int, bool]:
    """Mark open, embedded, unindexed gate rows `indexed` (the owner's, or everyone's).

    Each batch is its own transaction and claims its rows with FOR UPDATE SKIP
    LOCKED: rows a consent change (or another run) holds are left to it, and a run
    delivered twice does nothing twice. The UPDATE re-checks the condition on the
    row it locked, so a row blocked meanwhile stays out of the index.

    Stops when a batch comes back short (nothing left, as far as this run can
    claim) or after `max_seconds`. Returns (rows indexed, whether rows may remain).
    `batch_size`: rows per transaction (default INDEX_BATCH_SIZE).
    """
    batch_size = batch_size or INDEX_BATCH_SIZE
    started = time.monotonic()
    total = 0
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(*_claim_and_index(owner_id, batch_size))
            indexed = cursor.rowcount
        total += indexed
        if indexed < batch_size:
            return total, False
        if max_seconds is not None and time.monotonic() - started >= max_seconds:
            return total, True


def _claim_and_index(owner_id: int | None, batch_size: int) -> tuple[str, list]:
    """One batch's statement: claim up to `batch_size` open, unindexed rows (the owner's, or
    everyone's) and set them `indexed`."""
    table = MemoryGate._meta.db_table
    owner_sql, owner_params = ("AND owner_id = %s", [owner_id]) if owner_id is not None else ("", [])
    # MATERIALIZED: the claim runs once. As a subquery in FROM the planner may
    # evaluate it again for each row it joins, and each evaluation can claim other
    # rows than the last: a batch larger than asked.
    # = ANY(ARRAY(...)): the claimed ids are read once, then found by the primary
    # key, whatever the statistics say. As a join, with statistics taken while
    # nothing was open (just after a mass revoke, say) the planner expected one row
    # and read the claimed list again for every open row of the table: a batch of
    # 100,000 ran for minutes (10^10 comparisons) instead of seconds.
    return (
        f"WITH claimed AS MATERIALIZED (SELECT memory_id FROM {table} "
        f"  WHERE blocked_count = 0 AND NOT indexed AND embedding IS NOT NULL {owner_sql} "
        "  LIMIT %s FOR UPDATE SKIP LOCKED) "
        f"UPDATE {table} g SET indexed = true "
        "WHERE g.memory_id = ANY(ARRAY(SELECT memory_id FROM claimed)) "
        "AND g.blocked_count = 0 AND NOT g.indexed AND g.embedding IS NOT NULL",
        [*owner_params, batch_size],
    )
