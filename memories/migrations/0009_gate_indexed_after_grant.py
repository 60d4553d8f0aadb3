import pgvector.django.indexes
from django.db import migrations, models

# Consent flips (issue 14 item 5): a grant no longer pays the agents' vector index.
#
# A grant opens every memory of the person at once, and each opened gate row used to
# satisfy the predicate of memory_gate_open_hnsw (blocked_count = 0) in the same
# statement: one synchronous HNSW insert per memory, nearly all of a grant's time
# (bench_consent: 14-28 s for a person in 1,000 memories).
#
# Now a gate row also says whether it is `indexed`, and the agents' HNSW index holds
# only the open rows that are: blocked_count = 0 AND indexed. The triggers keep the
# flag (never Python):
# - a row that becomes blocked, or whose embedding goes, is not indexed;
# - a row that gets a new embedding while open is indexed at once (as before: the
#   worker storing an embedding pays the insert, a grant never does);
# - anything else leaves the flag as it was, so a row re-opened by a grant (or a
#   participant removed) stays unindexed.
# The task memories.index_opened_gates sets the flag on open, embedded, unindexed
# rows in batches, off the request (queued after a grant, and swept by beat).
# Until it has, the agents' search finds those rows through
# memory_gate_unindexed_idx (exact distance, usually none), beside the HNSW index:
# a memory a grant opens is found on the next query.
#
# The flag decides only through which index an open row is found. The NOT EXISTS
# gate in memories/retrieval.py still filters every agent result, so a wrong flag
# can leave a memory out of a result for a while, never show a blocked one.
#
# Existing rows: the column is added with DEFAULT true (no table rewrite), then the
# rows not in the open index are set false, before the new index is built (one
# build, not an insert per row).
ADD_COLUMN_SQL = """
ALTER TABLE memories_memorygate ADD COLUMN indexed boolean NOT NULL DEFAULT true;
UPDATE memories_memorygate SET indexed = false WHERE blocked_count <> 0 OR embedding IS NULL;
ALTER TABLE memories_memorygate ALTER COLUMN indexed SET DEFAULT false;
"""

DROP_COLUMN_SQL = "ALTER TABLE memories_memorygate DROP COLUMN indexed;"

REFRESH_SQL = """
CREATE OR REPLACE FUNCTION memories_gate_refresh(p_memories uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_memories IS NULL OR cardinality(p_memories) = 0 THEN
        RETURN;
    END IF;
    -- Lock first (id order: no deadlock between two refreshes), count after: each
    -- plpgsql statement takes a fresh snapshot under READ COMMITTED.
    PERFORM 1 FROM memories_memorygate WHERE memory_id = ANY (p_memories) ORDER BY memory_id FOR UPDATE;
    -- `indexed` (migration 0009): a new embedding on an open row goes into the agents'
    -- index at once; a row that becomes blocked or loses its embedding leaves it; a
    -- row that only opens keeps `false` until memories.index_opened_gates sets it.
    INSERT INTO memories_memorygate AS g (memory_id, owner_id, blocked_count, embedding, indexed)
        SELECT m.id, m.owner_id, counted.blocked, m.embedding::halfvec,
               counted.blocked = 0 AND m.embedding IS NOT NULL
        FROM memories_memory m
        CROSS JOIN LATERAL (SELECT memories_gate_blockers(m.id, m.source_person_id) AS blocked) counted
        WHERE m.id = ANY (p_memories)
        ORDER BY m.id
    ON CONFLICT (memory_id) DO UPDATE
        SET owner_id = EXCLUDED.owner_id, blocked_count = EXCLUDED.blocked_count,
            embedding = EXCLUDED.embedding,
            indexed = CASE
                WHEN EXCLUDED.blocked_count <> 0 OR EXCLUDED.embedding IS NULL THEN false
                WHEN g.embedding IS DISTINCT FROM EXCLUDED.embedding THEN true
                ELSE g.indexed
            END
        WHERE (g.owner_id, g.blocked_count, g.embedding)
              IS DISTINCT FROM (EXCLUDED.owner_id, EXCLUDED.blocked_count, EXCLUDED.embedding);
    -- A memory deleted earlier in this transaction keeps no gate row.
    DELETE FROM memories_memorygate g
    WHERE g.memory_id = ANY (p_memories)
      AND NOT EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = g.memory_id);
END
$$;
"""

# 0005's definition.
REFRESH_REVERSE_SQL = """
CREATE OR REPLACE FUNCTION memories_gate_refresh(p_memories uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_memories IS NULL OR cardinality(p_memories) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM memories_memorygate WHERE memory_id = ANY (p_memories) ORDER BY memory_id FOR UPDATE;
    INSERT INTO memories_memorygate (memory_id, owner_id, blocked_count, embedding)
        SELECT m.id, m.owner_id, memories_gate_blockers(m.id, m.source_person_id), m.embedding::halfvec
        FROM memories_memory m WHERE m.id = ANY (p_memories)
        ORDER BY m.id
    ON CONFLICT (memory_id) DO UPDATE
        SET owner_id = EXCLUDED.owner_id, blocked_count = EXCLUDED.blocked_count,
            embedding = EXCLUDED.embedding
        WHERE (memories_memorygate.owner_id, memories_memorygate.blocked_count, memories_memorygate.embedding)
              IS DISTINCT FROM (EXCLUDED.owner_id, EXCLUDED.blocked_count, EXCLUDED.embedding);
    DELETE FROM memories_memorygate g
    WHERE g.memory_id = ANY (p_memories)
      AND NOT EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = g.memory_id);
END
$$;
"""

OPEN_HNSW = {
    "fields": ["embedding"],
    "name": "memory_gate_open_hnsw",
    "m": 24,
    "ef_construction": 128,
    "opclasses": ["halfvec_cosine_ops"],
}


class Migration(migrations.Migration):
    dependencies = [("memories", "0008_gate_consent_flips")]

    operations = [
        # Dropped first: the backfill below would otherwise insert into it row by row.
        migrations.RemoveIndex(model_name="memorygate", name="memory_gate_open_hnsw"),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(ADD_COLUMN_SQL, DROP_COLUMN_SQL)],
            state_operations=[
                migrations.AddField(
                    model_name="memorygate",
                    name="indexed",
                    field=models.BooleanField(db_default=False, editable=False),
                )
            ],
        ),
        migrations.RunSQL(REFRESH_SQL, REFRESH_REVERSE_SQL),
        migrations.AddIndex(
            model_name="memorygate",
            index=pgvector.django.indexes.HnswIndex(
                condition=models.Q(("blocked_count", 0), ("indexed", True)), **OPEN_HNSW
            ),
        ),
        migrations.AddIndex(
            model_name="memorygate",
            index=models.Index(
                condition=models.Q(("blocked_count", 0), ("embedding__isnull", False), ("indexed", False)),
                fields=["owner"],
                name="memory_gate_unindexed_idx",
            ),
        ),
    ]
