import django.contrib.postgres.indexes
from django.contrib.postgres.operations import BtreeGinExtension
from django.db import migrations, models

# The agents' full-text side ranks only memories their count lets pass.
#
# memories_memorytext.agents_open copies `memories_memorygate.blocked_count = 0`,
# and the partial GIN index memory_text_open_gin on (owner, text vector) holds only
# those rows: the text twin of memory_gate_open_hnsw. Before it, the agents' full-text
# side ranked the first TEXT_CANDIDATES_MAX of all the owner's matches and probed the
# gate in rank order, so at 90% gated nine in ten of a common word's ranked matches
# were blocked ones, and which open ones got ranked was luck of physical order.
#
# Kept where the count is kept, never by Python:
# - memories_gate_refresh (every change of a count goes through it) copies the counts
#   it wrote to the memories' text rows, after them (the gate rows are locked first,
#   so two refreshes of one memory still run one after the other);
# - a memory's text row is inserted with the flag its gate row already has (the gate's
#   insert trigger fires first, by name; if it ever did not, the participants' and the
#   gate's next refresh would set it).
# Existing rows are set once from the gate table.
FORWARD = """
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
    -- The full-text copy's flag (migration 0012), for the rows whose count changed.
    UPDATE memories_memorytext t SET agents_open = (g.blocked_count = 0)
    FROM memories_memorygate g
    WHERE g.memory_id = t.memory_id AND t.memory_id = ANY (p_memories)
      AND t.agents_open IS DISTINCT FROM (g.blocked_count = 0);
END
$$;

CREATE OR REPLACE FUNCTION memories_text_on_memory_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memories_memorytext (memory_id, owner_id, occurred_at, search_vector, agents_open)
        SELECT i.id, i.owner_id, i.occurred_at, i.search_vector, coalesce(g.blocked_count = 0, false)
        FROM inserted i LEFT JOIN memories_memorygate g ON g.memory_id = i.id;
    RETURN NULL;
END
$$;

UPDATE memories_memorytext t SET agents_open = true
FROM memories_memorygate g
WHERE g.memory_id = t.memory_id AND g.blocked_count = 0 AND NOT t.agents_open;
"""

# 0009's and 0011's definitions.
BACKWARD = """
CREATE OR REPLACE FUNCTION memories_gate_refresh(p_memories uuid[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_memories IS NULL OR cardinality(p_memories) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM memories_memorygate WHERE memory_id = ANY (p_memories) ORDER BY memory_id FOR UPDATE;
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
    DELETE FROM memories_memorygate g
    WHERE g.memory_id = ANY (p_memories)
      AND NOT EXISTS (SELECT 1 FROM memories_memory m WHERE m.id = g.memory_id);
END
$$;

CREATE OR REPLACE FUNCTION memories_text_on_memory_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memories_memorytext (memory_id, owner_id, occurred_at, search_vector)
        SELECT id, owner_id, occurred_at, search_vector FROM inserted;
    RETURN NULL;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0011_memory_text_for_search")]

    operations = [
        BtreeGinExtension(),
        migrations.AddField(
            model_name="memorytext",
            name="agents_open",
            field=models.BooleanField(db_default=False, default=False, editable=False),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.AddIndex(
            model_name="memorytext",
            index=django.contrib.postgres.indexes.GinIndex(
                condition=models.Q(("agents_open", True)),
                fields=["owner", "search_vector"],
                name="memory_text_open_gin",
            ),
        ),
    ]
