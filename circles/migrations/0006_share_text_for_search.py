import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.db import migrations, models

# The share's copy of the memory's text vector, beside its copies of the owner, the
# date and the embedding (0002), for the full-text side of circle search. Two partial
# GIN indexes (btree_gin): memory_share_open_text on (circle, text vector) over the
# shares whose count lets them pass (blocked_count = 0), the text twin of
# memory_share_open_hnsw, and memory_share_blocked_text on (owner, circle, text
# vector) over the others, for a viewer's own blocked shares (the owner always sees
# their own). Before them, a common word's matches were read from every memory
# (hash-joined with the circle's shares: ~15,000 matches read to rank 3,000 shared
# ones, 14 ms p95 for the full-text statement at 20,000 shares).
#
# Kept by the same functions as the other copies: circles_share_refresh and the
# insert trigger copy it, and a memory whose text vector changes (its title or body)
# refreshes its shares. The WHEN clause compares tsvectors (a built-in type: dumped
# and restored as is, unlike the vector comparison 0003 rewrote).
FORWARD = """
CREATE OR REPLACE FUNCTION circles_share_refresh(p_memories uuid[], p_circle uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_memories IS NULL OR cardinality(p_memories) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM circles_memoryshare
    WHERE memory_id = ANY (p_memories) AND (p_circle IS NULL OR circle_id = p_circle)
    ORDER BY id FOR UPDATE;
    UPDATE circles_memoryshare s
    SET blocked_count = circles_share_blockers(s.memory_id, s.circle_id),
        owner_id = m.owner_id, occurred_at = m.occurred_at, embedding = m.embedding::halfvec,
        search_vector = m.search_vector
    FROM memories_memory m
    WHERE m.id = s.memory_id AND s.memory_id = ANY (p_memories) AND (p_circle IS NULL OR s.circle_id = p_circle)
      AND (s.blocked_count, s.owner_id, s.occurred_at, s.embedding, s.search_vector)
          IS DISTINCT FROM (circles_share_blockers(s.memory_id, s.circle_id), m.owner_id, m.occurred_at,
                            m.embedding::halfvec, m.search_vector);
END
$$;

CREATE OR REPLACE FUNCTION circles_share_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.blocked_count := circles_share_blockers(NEW.memory_id, NEW.circle_id);
    SELECT m.owner_id, m.occurred_at, m.embedding::halfvec, m.search_vector
    INTO NEW.owner_id, NEW.occurred_at, NEW.embedding, NEW.search_vector
    FROM memories_memory m WHERE m.id = NEW.memory_id;
    RETURN NEW;
END
$$;

DROP TRIGGER circles_share_memory_update ON memories_memory;
CREATE TRIGGER circles_share_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.source_person_id IS DISTINCT FROM NEW.source_person_id
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at
          OR (OLD.embedding IS NULL) <> (NEW.embedding IS NULL)
          OR OLD.embedding <> NEW.embedding
          OR OLD.search_vector IS DISTINCT FROM NEW.search_vector)
    EXECUTE FUNCTION circles_share_on_memory_update();

-- Existing shares: every row is rewritten, so the open shares' HNSW index is built
-- again once afterwards rather than given one insert per share (45 s for 20,000).
DROP INDEX memory_share_open_hnsw;
UPDATE circles_memoryshare s SET search_vector = m.search_vector
FROM memories_memory m WHERE m.id = s.memory_id;
CREATE INDEX memory_share_open_hnsw ON circles_memoryshare
    USING hnsw (embedding halfvec_cosine_ops) WITH (m = 24, ef_construction = 128)
    WHERE blocked_count = 0;
"""

BACKWARD = """
CREATE OR REPLACE FUNCTION circles_share_refresh(p_memories uuid[], p_circle uuid) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_memories IS NULL OR cardinality(p_memories) = 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM circles_memoryshare
    WHERE memory_id = ANY (p_memories) AND (p_circle IS NULL OR circle_id = p_circle)
    ORDER BY id FOR UPDATE;
    UPDATE circles_memoryshare s
    SET blocked_count = circles_share_blockers(s.memory_id, s.circle_id),
        owner_id = m.owner_id, occurred_at = m.occurred_at, embedding = m.embedding::halfvec
    FROM memories_memory m
    WHERE m.id = s.memory_id AND s.memory_id = ANY (p_memories) AND (p_circle IS NULL OR s.circle_id = p_circle)
      AND (s.blocked_count, s.owner_id, s.occurred_at, s.embedding)
          IS DISTINCT FROM (circles_share_blockers(s.memory_id, s.circle_id), m.owner_id, m.occurred_at,
                            m.embedding::halfvec);
END
$$;

CREATE OR REPLACE FUNCTION circles_share_on_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.blocked_count := circles_share_blockers(NEW.memory_id, NEW.circle_id);
    SELECT m.owner_id, m.occurred_at, m.embedding::halfvec INTO NEW.owner_id, NEW.occurred_at, NEW.embedding
    FROM memories_memory m WHERE m.id = NEW.memory_id;
    RETURN NEW;
END
$$;

DROP TRIGGER circles_share_memory_update ON memories_memory;
CREATE TRIGGER circles_share_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.source_person_id IS DISTINCT FROM NEW.source_person_id
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at
          OR (OLD.embedding IS NULL) <> (NEW.embedding IS NULL)
          OR OLD.embedding <> NEW.embedding)
    EXECUTE FUNCTION circles_share_on_memory_update();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("circles", "0005_share_count_indexes"),
        ("memories", "0012_memory_text_agents_open"),  # creates btree_gin
    ]

    operations = [
        migrations.AddField(
            model_name="memoryshare",
            name="search_vector",
            field=django.contrib.postgres.search.SearchVectorField(editable=False, null=True),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.AddIndex(
            model_name="memoryshare",
            index=django.contrib.postgres.indexes.GinIndex(
                condition=models.Q(("blocked_count", 0)),
                fields=["circle", "search_vector"],
                name="memory_share_open_text",
            ),
        ),
        migrations.AddIndex(
            model_name="memoryshare",
            index=django.contrib.postgres.indexes.GinIndex(
                condition=models.Q(("blocked_count__gt", 0)),
                fields=["owner", "circle", "search_vector"],
                name="memory_share_blocked_text",
            ),
        ),
    ]
