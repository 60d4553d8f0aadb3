from django.db import migrations

# Makes the database restorable from a pg_dump (backups/, `manage.py restore`).
#
# 0005 gave memories_gate_memory_update the condition
# `OLD.embedding IS DISTINCT FROM NEW.embedding`. pg_dump prints a trigger's WHEN
# with operators schema-qualified (it dumps with an empty search_path), but
# IS DISTINCT FROM has no syntax for naming its operator's schema, so the dump says
# `old.embedding IS DISTINCT FROM new.embedding`, and pg_restore, which also runs with
# an empty search_path, fails: "operator does not exist: public.vector = public.vector".
# Every restore of a Keepsake database stopped there.
#
# The same condition, written with `<>` (which pg_dump prints as OPERATOR(public.<>)):
# fires when exactly one side is NULL, or both are vectors that differ; not when
# both are NULL (then the `<>` is NULL). Nothing else changes.
SQL = """
DROP TRIGGER memories_gate_memory_update ON memories_memory;
CREATE TRIGGER memories_gate_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.source_person_id IS DISTINCT FROM NEW.source_person_id
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.id IS DISTINCT FROM NEW.id
          OR (OLD.embedding IS NULL) <> (NEW.embedding IS NULL)
          OR OLD.embedding <> NEW.embedding)
    EXECUTE FUNCTION memories_gate_on_memory_update();
"""

REVERSE_SQL = """
DROP TRIGGER memories_gate_memory_update ON memories_memory;
CREATE TRIGGER memories_gate_memory_update
    AFTER UPDATE ON memories_memory FOR EACH ROW
    WHEN (OLD.source_person_id IS DISTINCT FROM NEW.source_person_id
          OR OLD.owner_id IS DISTINCT FROM NEW.owner_id
          OR OLD.id IS DISTINCT FROM NEW.id
          OR OLD.embedding IS DISTINCT FROM NEW.embedding)
    EXECUTE FUNCTION memories_gate_on_memory_update();
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0006_self_gates_untagged")]

    operations = [migrations.RunSQL(SQL, REVERSE_SQL)]
