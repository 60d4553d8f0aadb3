"""The rows workers write about memories (edges, supersession proposals) cascade in PostgreSQL.

Why the database and not only Django: deleting a memory, Django first deletes the
rows that reference it (by the ids or the condition it saw), then the memory. An
edge a worker committed in between is in neither, so the memory's foreign key
still had a referent at COMMIT and the whole deletion failed (a 500 that deleted
nothing, issue #40). With ON DELETE CASCADE on the constraint, removing the memory
row removes whatever references it at that instant, whichever path deletes it (a
memory, a whole account, a future bulk delete). The worker's side of the race is
in memories.services.memories_lock_for_reference: it locks the rows it points at
before inserting, so it waits for a deletion and then skips the gone memory rather
than failing at its own COMMIT.

Django does not model ON DELETE in the database (5.2), so this is SQL. The
constraints keep their names and stay DEFERRABLE INITIALLY DEFERRED (the checks
Django expects); only the action changes. A later migration that rebuilds one of
these foreign keys must carry the cascade again (tests/memories/test_deletion_race.py
checks it is in place).
"""

from django.db import migrations

TABLES = ("memories_memoryedge", "memories_supersessionproposal")


def _set_action(action: str) -> str:
    tables = ", ".join(f"'{table}'::regclass" for table in TABLES)
    return f"""
DO $$
DECLARE
    fk record;
BEGIN
    FOR fk IN
        SELECT c.conrelid::regclass AS tbl, c.conname, a.attname
          FROM pg_constraint c
          JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
         WHERE c.contype = 'f'
           AND c.conrelid IN ({tables})
           AND c.confrelid = 'memories_memory'::regclass
    LOOP
        EXECUTE format(
            'ALTER TABLE %s DROP CONSTRAINT %I, ADD CONSTRAINT %I FOREIGN KEY (%I) '
            'REFERENCES memories_memory (id) {action} DEFERRABLE INITIALLY DEFERRED',
            fk.tbl, fk.conname, fk.conname, fk.attname
        );
    END LOOP;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0016_memory_gate_changes"),
    ]

    operations = [
        migrations.RunSQL(sql=_set_action("ON DELETE CASCADE"), reverse_sql=_set_action("")),
    ]
