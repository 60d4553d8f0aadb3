from django.db import migrations

# The access log ("who has seen this memory") is append-only in the database, as the
# consent history is (people 0003/0005): no surface offers to change it, and this makes
# sure no code path, bug or hand-written query does either.
#
# UPDATE is refused, except what the foreign keys themselves do: deleting an agent or
# a viewer's account sets agent_id / viewer_id to NULL (SET_NULL; the agent's name is
# kept in agent_name), nothing else changed.
#
# DELETE is allowed only together with the memory the row is about: deleting a memory
# (or a whole account, whose memories go first) takes its log with it, as the owner
# asked. Django deletes the log rows *before* the memory (its cascade runs in Python),
# so a row trigger cannot yet tell; a deferred constraint trigger checks at commit
# that the memory is gone, or that this transaction is erasing the owner's account
# (`keepsake.erasing_account`, set by portability.services.account_delete).
SQL = """
CREATE FUNCTION agents_accesslog_refuse_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.agent_id IS NULL OR NEW.agent_id IS NOT DISTINCT FROM OLD.agent_id)
       AND (NEW.viewer_id IS NULL OR NEW.viewer_id IS NOT DISTINCT FROM OLD.viewer_id)
       AND (to_jsonb(NEW) - 'agent_id' - 'viewer_id') = (to_jsonb(OLD) - 'agent_id' - 'viewer_id') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'The access log is append-only: it cannot be changed.'
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER agents_accesslog_refuse_update
    BEFORE UPDATE ON agents_accesslog
    FOR EACH ROW EXECUTE FUNCTION agents_accesslog_refuse_update();

CREATE FUNCTION agents_accesslog_delete_only_with_memory() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('keepsake.erasing_account', true) = OLD.owner_id::text THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM memories_memory WHERE id = OLD.memory_id) THEN
        RAISE EXCEPTION 'The access log is append-only: an entry goes only with its memory.'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER agents_accesslog_delete_only_with_memory
    AFTER DELETE ON agents_accesslog
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION agents_accesslog_delete_only_with_memory();
"""

REVERSE_SQL = """
DROP TRIGGER IF EXISTS agents_accesslog_delete_only_with_memory ON agents_accesslog;
DROP FUNCTION IF EXISTS agents_accesslog_delete_only_with_memory();
DROP TRIGGER IF EXISTS agents_accesslog_refuse_update ON agents_accesslog;
DROP FUNCTION IF EXISTS agents_accesslog_refuse_update();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_memory_proposals"),
        ("memories", "0007_gate_trigger_restorable"),
    ]

    operations = [migrations.RunSQL(SQL, REVERSE_SQL)]
