import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# The full-text side's narrow copy of each memory (see MemoryText), kept by triggers
# on memories_memory in the same statement as the change:
# - inserted memories (one statement-level trigger: a COPY or bulk insert of
#   thousands is one INSERT ... SELECT here);
# - a memory whose search vector (its title or body), date, owner or id changed
#   (row level, with a WHEN clause: Django saves set every column, and only these
#   matter; the clause is checked without calling the function);
# - deleted memories (statement level).
# Existing memories are copied once, after the triggers exist (ON CONFLICT: a row a
# trigger already wrote is not written twice), in the memories' own physical order,
# as the triggers would have written them: the full-text side ranks the first
# TEXT_CANDIDATES_MAX matches in that order, so a copy in another order (a parallel
# scan's) would change which ones a broad query ranks. pg_dump restores the table's rows
# before it creates the triggers, so a restore copies nothing twice either; the
# WHEN clause names only built-in types, whose operators a restore finds with an
# empty search_path (unlike pgvector's: migration 0007).
FORWARD = """
CREATE FUNCTION memories_text_on_memory_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memories_memorytext (memory_id, owner_id, occurred_at, search_vector)
        SELECT id, owner_id, occurred_at, search_vector FROM inserted;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_text_memory_insert
    AFTER INSERT ON memories_memory REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION memories_text_on_memory_insert();

CREATE FUNCTION memories_text_on_memory_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories_memorytext
        SET memory_id = NEW.id, owner_id = NEW.owner_id, occurred_at = NEW.occurred_at,
            search_vector = NEW.search_vector
        WHERE memory_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_text_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.search_vector IS DISTINCT FROM NEW.search_vector
          OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION memories_text_on_memory_update();

CREATE FUNCTION memories_text_on_memory_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memories_memorytext t USING deleted d WHERE t.memory_id = d.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_text_memory_delete
    AFTER DELETE ON memories_memory REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION memories_text_on_memory_delete();

INSERT INTO memories_memorytext (memory_id, owner_id, occurred_at, search_vector)
    SELECT id, owner_id, occurred_at, search_vector FROM memories_memory ORDER BY ctid
ON CONFLICT (memory_id) DO NOTHING;
ANALYZE memories_memorytext;
"""

BACKWARD = """
DROP TRIGGER memories_text_memory_insert ON memories_memory;
DROP TRIGGER memories_text_memory_update ON memories_memory;
DROP TRIGGER memories_text_memory_delete ON memories_memory;
DROP FUNCTION memories_text_on_memory_insert();
DROP FUNCTION memories_text_on_memory_update();
DROP FUNCTION memories_text_on_memory_delete();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0010_embedding_stored_inline"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="MemoryText",
            fields=[
                (
                    "memory",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="memories.memory",
                    ),
                ),
                ("occurred_at", models.DateTimeField()),
                ("search_vector", django.contrib.postgres.search.SearchVectorField()),
                (
                    "owner",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    django.contrib.postgres.indexes.GinIndex(
                        fields=["search_vector"], name="memory_text_search_gin"
                    )
                ],
            },
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
