from django.db import migrations

# Consent flips (issue 14 item 5): a change of people's consent refreshes the gate
# rows once per statement, not once per person row.
#
# The row-level trigger of 0004/0006 ran the refresh for every person an UPDATE
# changed, so one statement changing several people (a bulk change) locked,
# recounted and rewrote a memory with two of them twice: two new row versions, and
# for a grant two inserts into the agents' vector index. The statement-level
# trigger below sees every changed person at once (transition tables) and
# refreshes the union of their memories in one memories_gate_refresh: each gate row
# is locked, counted and written at most once per statement.
#
# Which people matter is decided, as the row-level WHEN clause did, on the rows
# themselves: a person whose (id, owner, is_self, granted-ness) differs between the
# old and the new rows. That also covers a changed id (the old and the new id both
# differ) and an owner change (refreshed for any person now, not only Self: more
# work, never a wrong count; no code changes a person's owner). A statement that
# changes nothing the gate reads (a name, a photo) refreshes nothing.
#
# Not done here: the agents' index keeps ef_construction 128. At 64 a grant for a
# person in 1,000 memories took about half as long, but bench_consent, with the
# index rebuilt at 64, measured agents' recall@10 at 0.959 with nothing gated
# (the goal is >= 0.99); not shipped without a like-for-like comparison.
#
# The NOT EXISTS gate in memories/retrieval.py is untouched: the count stays a hint,
# and a revocation hides a memory on the next query whatever the index holds.
PERSON_SQL = """
DROP TRIGGER memories_gate_person_update ON people_person;

CREATE FUNCTION memories_gate_on_people_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memories_gate_refresh(ARRAY(
        WITH changed AS (
            (SELECT id, owner_id, is_self, consent_status = 'granted' AS granted FROM old_people
             EXCEPT
             SELECT id, owner_id, is_self, consent_status = 'granted' FROM new_people)
            UNION
            (SELECT id, owner_id, is_self, consent_status = 'granted' FROM new_people
             EXCEPT
             SELECT id, owner_id, is_self, consent_status = 'granted' FROM old_people)
        )
        SELECT p.memory_id FROM memories_memoryparticipant p WHERE p.person_id IN (SELECT id FROM changed)
        UNION
        SELECT m.id FROM memories_memory m WHERE m.source_person_id IN (SELECT id FROM changed)
        UNION
        SELECT m.id FROM memories_memory m
        WHERE m.owner_id IN (SELECT owner_id FROM changed WHERE is_self)
          AND NOT EXISTS (SELECT 1 FROM memories_memoryparticipant p WHERE p.memory_id = m.id)
    ));
    RETURN NULL;
END
$$;
CREATE TRIGGER memories_gate_people_update
    AFTER UPDATE ON people_person REFERENCING OLD TABLE AS old_people NEW TABLE AS new_people
    FOR EACH STATEMENT EXECUTE FUNCTION memories_gate_on_people_update();
"""

PERSON_REVERSE_SQL = """
DROP TRIGGER memories_gate_people_update ON people_person;
DROP FUNCTION memories_gate_on_people_update();
CREATE TRIGGER memories_gate_person_update
    AFTER UPDATE ON people_person FOR EACH ROW
    WHEN ((OLD.consent_status = 'granted') IS DISTINCT FROM (NEW.consent_status = 'granted')
          OR OLD.id IS DISTINCT FROM NEW.id
          OR OLD.is_self IS DISTINCT FROM NEW.is_self
          OR (OLD.is_self AND OLD.owner_id IS DISTINCT FROM NEW.owner_id))
    EXECUTE FUNCTION memories_gate_on_person_change();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0007_gate_trigger_restorable"),
        ("people", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(PERSON_SQL, PERSON_REVERSE_SQL),
    ]
