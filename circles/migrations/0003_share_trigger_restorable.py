from django.db import migrations

# Makes the database restorable from a pg_dump (backups/, `manage.py restore`); the
# same fix as memories/migrations/0007_gate_trigger_restorable.py.
#
# 0002 gave circles_share_memory_update the condition
# `OLD.embedding IS DISTINCT FROM NEW.embedding`. pg_dump cannot schema-qualify the
# operator behind IS DISTINCT FROM, and pg_restore runs with an empty search_path, so
# restoring failed with "operator does not exist: public.vector = public.vector".
# Written with `<>` instead (dumped as OPERATOR(public.<>)), the condition is the
# same: it fires when exactly one side is NULL or both are vectors that differ.
SQL = """
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

REVERSE_SQL = """
DROP TRIGGER circles_share_memory_update ON memories_memory;
CREATE TRIGGER circles_share_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.source_person_id IS DISTINCT FROM NEW.source_person_id
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at
          OR OLD.embedding IS DISTINCT FROM NEW.embedding)
    EXECUTE FUNCTION circles_share_on_memory_update();
"""


class Migration(migrations.Migration):
    dependencies = [("circles", "0002_share_gate_hint")]

    operations = [migrations.RunSQL(SQL, REVERSE_SQL)]
