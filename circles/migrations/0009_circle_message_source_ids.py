import django.contrib.postgres.fields
from django.db import migrations, models

# A circle chat reply keeps the ids of the memories it was built from (SPEC §3: what is
# made from a memory is gated like the memory). Filled from the citations in prompt
# order. A citation row went with its memory when that memory was deleted, so an
# answered reply with no citations left may have quoted one: nobody can tell, and such
# a reply would otherwise be shown to every reader as sourceless. It gets the nil UUID,
# a source no memory can be (ids are uuid4), so the gate never lets it through and the
# reply reads as the placeholder for everyone (fail closed). Replies that failed
# (is_error) never carried a memory and keep no sources.
FILL = """
UPDATE circles_circlemessage AS message
SET source_ids = cited.ids
FROM (
    SELECT circlemessage_id, array_agg(memory_id ORDER BY id) AS ids
    FROM circles_circlemessage_cited_memories
    GROUP BY circlemessage_id
) AS cited
WHERE cited.circlemessage_id = message.id;

UPDATE circles_circlemessage
SET source_ids = ARRAY['00000000-0000-0000-0000-000000000000']::uuid[]
WHERE role = 'assistant' AND NOT is_error AND source_ids = '{}';
"""


class Migration(migrations.Migration):
    dependencies = [
        ("circles", "0008_sensitive_clearance"),
    ]

    operations = [
        migrations.AddField(
            model_name="circlemessage",
            name="source_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.UUIDField(), blank=True, default=list, size=None
            ),
        ),
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
    ]
