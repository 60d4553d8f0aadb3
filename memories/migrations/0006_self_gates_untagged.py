from django.db import migrations

# A memory with nobody in it is the owner's own: the owner's Self person counts as
# its participant. Revoking Self (for agents) therefore hides every memory that has
# no participants, and a missing Self row hides them too (fail closed, as a
# participant whose person row is missing does).
#
# blocked_count(m) gains one term: + 1 if m has no participants and its owner has
# no granted Self person. The memory's own triggers already refresh it whenever its
# participants change; a change to a Self person (granted-ness, is_self, owner,
# insert or delete) now also refreshes every memory of that owner without
# participants.
SQL = """
CREATE OR REPLACE FUNCTION memories_gate_blockers(p_memory uuid, p_source uuid) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT (
        SELECT count(*) FROM memories_memoryparticipant p
        WHERE p.memory_id = p_memory
          AND NOT EXISTS (
              SELECT 1 FROM people_person pp WHERE pp.id = p.person_id AND pp.consent_status = 'granted'
          )
    )::integer
    + CASE WHEN p_source IS NOT NULL AND NOT EXISTS (
          SELECT 1 FROM people_person pp WHERE pp.id = p_source AND pp.consent_status = 'granted'
      ) THEN 1 ELSE 0 END
    + CASE WHEN NOT EXISTS (SELECT 1 FROM memories_memoryparticipant p WHERE p.memory_id = p_memory)
           AND NOT EXISTS (
               SELECT 1 FROM memories_memory m
               JOIN people_person s ON s.owner_id = m.owner_id AND s.is_self AND s.consent_status = 'granted'
               WHERE m.id = p_memory
           )
      THEN 1 ELSE 0 END
$$;

CREATE OR REPLACE FUNCTION memories_gate_on_person_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[];
    v_self_owners integer[] := ARRAY[]::integer[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        v_ids := ARRAY[NEW.id];
        IF NEW.is_self THEN v_self_owners := ARRAY[NEW.owner_id]; END IF;
    ELSIF TG_OP = 'DELETE' THEN
        v_ids := ARRAY[OLD.id];
        IF OLD.is_self THEN v_self_owners := ARRAY[OLD.owner_id]; END IF;
    ELSE
        v_ids := ARRAY[OLD.id, NEW.id];
        IF OLD.is_self THEN v_self_owners := v_self_owners || OLD.owner_id; END IF;
        IF NEW.is_self THEN v_self_owners := v_self_owners || NEW.owner_id; END IF;
    END IF;
    PERFORM memories_gate_refresh(ARRAY(
        SELECT memory_id FROM memories_memoryparticipant WHERE person_id = ANY (v_ids)
        UNION
        SELECT id FROM memories_memory WHERE source_person_id = ANY (v_ids)
        UNION
        SELECT m.id FROM memories_memory m
        WHERE m.owner_id = ANY (v_self_owners)
          AND NOT EXISTS (SELECT 1 FROM memories_memoryparticipant p WHERE p.memory_id = m.id)
    ));
    RETURN NULL;
END
$$;

DROP TRIGGER memories_gate_person_update ON people_person;
CREATE TRIGGER memories_gate_person_update
    AFTER UPDATE ON people_person FOR EACH ROW
    WHEN ((OLD.consent_status = 'granted') IS DISTINCT FROM (NEW.consent_status = 'granted')
          OR OLD.id IS DISTINCT FROM NEW.id
          OR OLD.is_self IS DISTINCT FROM NEW.is_self
          OR (OLD.is_self AND OLD.owner_id IS DISTINCT FROM NEW.owner_id))
    EXECUTE FUNCTION memories_gate_on_person_change();

-- Existing memories without participants.
SELECT memories_gate_refresh(ARRAY(
    SELECT m.id FROM memories_memory m
    WHERE NOT EXISTS (SELECT 1 FROM memories_memoryparticipant p WHERE p.memory_id = m.id)
));
"""

REVERSE_SQL = """
CREATE OR REPLACE FUNCTION memories_gate_blockers(p_memory uuid, p_source uuid) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT (
        SELECT count(*) FROM memories_memoryparticipant p
        WHERE p.memory_id = p_memory
          AND NOT EXISTS (
              SELECT 1 FROM people_person pp WHERE pp.id = p.person_id AND pp.consent_status = 'granted'
          )
    )::integer
    + CASE WHEN p_source IS NOT NULL AND NOT EXISTS (
          SELECT 1 FROM people_person pp WHERE pp.id = p_source AND pp.consent_status = 'granted'
      ) THEN 1 ELSE 0 END
$$;

CREATE OR REPLACE FUNCTION memories_gate_on_person_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_ids uuid[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        v_ids := ARRAY[NEW.id];
    ELSIF TG_OP = 'DELETE' THEN
        v_ids := ARRAY[OLD.id];
    ELSE
        v_ids := ARRAY[OLD.id, NEW.id];
    END IF;
    PERFORM memories_gate_refresh(ARRAY(
        SELECT memory_id FROM memories_memoryparticipant WHERE person_id = ANY (v_ids)
        UNION
        SELECT id FROM memories_memory WHERE source_person_id = ANY (v_ids)
    ));
    RETURN NULL;
END
$$;

DROP TRIGGER memories_gate_person_update ON people_person;
CREATE TRIGGER memories_gate_person_update
    AFTER UPDATE ON people_person FOR EACH ROW
    WHEN ((OLD.consent_status = 'granted') IS DISTINCT FROM (NEW.consent_status = 'granted')
          OR OLD.id IS DISTINCT FROM NEW.id)
    EXECUTE FUNCTION memories_gate_on_person_change();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0005_gate_open_vectors"),
        ("people", "0001_initial"),
    ]

    operations = [migrations.RunSQL(SQL, REVERSE_SQL)]
