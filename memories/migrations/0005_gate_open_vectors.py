import pgvector.django.halfvec
import pgvector.django.indexes
from django.conf import settings
from django.db import migrations, models

# The gate rows also carry the memory's embedding at half precision, so that the
# memories nothing blocks have a vector index of their own (memory_gate_open_hnsw,
# partial: blocked_count = 0). An agent's nearest-neighbour search walks that
# index, where by the count every entry can pass the gate, instead of the index of
# all memories, where at 90% gated nine entries in ten are walked and dropped.
#
# The copy is kept by the triggers of 0004: memories_gate_refresh now writes
# embedding::halfvec too, and the memory-update trigger also fires when the
# embedding changes. As before, the copy is a hint for where to look: the
# NOT EXISTS gate in memories/retrieval.py still filters every agent result.
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
    INSERT INTO memories_memorygate (memory_id, owner_id, blocked_count, embedding)
        SELECT m.id, m.owner_id, memories_gate_blockers(m.id, m.source_person_id), m.embedding::halfvec
        FROM memories_memory m WHERE m.id = ANY (p_memories)
        ORDER BY m.id
    ON CONFLICT (memory_id) DO UPDATE
        SET owner_id = EXCLUDED.owner_id, blocked_count = EXCLUDED.blocked_count,
            embedding = EXCLUDED.embedding
        WHERE (memories_memorygate.owner_id, memories_memorygate.blocked_count, memories_memorygate.embedding)
              IS DISTINCT FROM (EXCLUDED.owner_id, EXCLUDED.blocked_count, EXCLUDED.embedding);
    -- A memory deleted earlier in this transaction keeps no gate row.
    DELETE FROM memories_memorygate g
    WHERE g.memory_id = ANY (p_memories)
      AND NOT EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = g.memory_id);
END
$$;

DROP TRIGGER memories_gate_memory_update ON memories_memory;
CREATE TRIGGER memories_gate_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.source_person_id IS DISTINCT FROM NEW.source_person_id
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.id IS DISTINCT FROM NEW.id
          OR OLD.embedding IS DISTINCT FROM NEW.embedding)
    EXECUTE FUNCTION memories_gate_on_memory_update();

-- Existing memories.
UPDATE memories_memorygate g SET embedding = m.embedding::halfvec
FROM memories_memory m WHERE m.id = g.memory_id AND m.embedding IS NOT NULL;
"""

REFRESH_REVERSE_SQL = """
CREATE OR REPLACE FUNCTION memories_gate_refresh(p_memories uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_memories IS NULL OR cardinality(p_memories) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM memories_memorygate WHERE memory_id = ANY (p_memories) ORDER BY memory_id FOR UPDATE;
    INSERT INTO memories_memorygate (memory_id, owner_id, blocked_count)
        SELECT m.id, m.owner_id, memories_gate_blockers(m.id, m.source_person_id)
        FROM memories_memory m WHERE m.id = ANY (p_memories)
        ORDER BY m.id
    ON CONFLICT (memory_id) DO UPDATE
        SET owner_id = EXCLUDED.owner_id, blocked_count = EXCLUDED.blocked_count
        WHERE (memories_memorygate.owner_id, memories_memorygate.blocked_count)
              IS DISTINCT FROM (EXCLUDED.owner_id, EXCLUDED.blocked_count);
    DELETE FROM memories_memorygate g
    WHERE g.memory_id = ANY (p_memories)
      AND NOT EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = g.memory_id);
END
$$;

DROP TRIGGER memories_gate_memory_update ON memories_memory;
CREATE TRIGGER memories_gate_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.source_person_id IS DISTINCT FROM NEW.source_person_id
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION memories_gate_on_memory_update();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0004_memory_gate_counts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="memorygate",
            name="embedding",
            field=pgvector.django.halfvec.HalfVectorField(dimensions=384, editable=False, null=True),
        ),
        # Backfill before the index: one build is much faster than row-by-row inserts.
        migrations.RunSQL(REFRESH_SQL, REFRESH_REVERSE_SQL),
        migrations.AddIndex(
            model_name="memorygate",
            index=pgvector.django.indexes.HnswIndex(
                condition=models.Q(("blocked_count", 0)),
                ef_construction=128,
                fields=["embedding"],
                m=24,
                name="memory_gate_open_hnsw",
                opclasses=["halfvec_cosine_ops"],
            ),
        ),
    ]
