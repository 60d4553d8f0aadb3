from django.db import migrations

# doctor --fix merges exact duplicate memories (same owner, text and time) into the
# oldest copy and moves the other rows that point at a copy — the access log included —
# to the keeper, so "who has seen this" still says an agent was given that text. The
# append-only trigger (0005) refused that move. It is allowed only for the memory
# doctor is merging in this transaction (`keepsake.merging_memory`, set by
# memories.doctor with set_config(..., true)) and only the memory changes.
SQL = """
CREATE OR REPLACE FUNCTION agents_accesslog_refuse_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.agent_id IS NULL OR NEW.agent_id IS NOT DISTINCT FROM OLD.agent_id)
       AND (NEW.viewer_id IS NULL OR NEW.viewer_id IS NOT DISTINCT FROM OLD.viewer_id)
       AND (to_jsonb(NEW) - 'agent_id' - 'viewer_id') = (to_jsonb(OLD) - 'agent_id' - 'viewer_id') THEN
        RETURN NEW;
    END IF;
    IF current_setting('keepsake.merging_memory', true) = OLD.memory_id::text
       AND NEW.agent_id IS NOT DISTINCT FROM OLD.agent_id
       AND NEW.viewer_id IS NOT DISTINCT FROM OLD.viewer_id
       AND (to_jsonb(NEW) - 'memory_id') = (to_jsonb(OLD) - 'memory_id') THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'The access log is append-only: it cannot be changed.'
        USING ERRCODE = 'insufficient_privilege';
END
$$;
"""

REVERSE_SQL = """
CREATE OR REPLACE FUNCTION agents_accesslog_refuse_update() RETURNS trigger
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
"""


class Migration(migrations.Migration):
    dependencies = [("agents", "0005_access_log_append_only")]

    operations = [migrations.RunSQL(SQL, REVERSE_SQL)]
