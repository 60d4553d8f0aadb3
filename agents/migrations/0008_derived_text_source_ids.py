import django.contrib.postgres.fields
from django.db import migrations, models

# Chat replies and memory proposals keep the ids of the memories they were built from
# (SPEC §3: what is made from a memory is gated like the memory), filled here from the
# citations (prompt order) and an insight proposal's sources. The owner reads their own
# chats and proposals in full, so a reply whose cited memory was already deleted simply
# keeps the sources that are left.
FILL = """
UPDATE agents_message AS message
SET source_ids = cited.ids
FROM (
    SELECT message_id, array_agg(memory_id ORDER BY id) AS ids
    FROM agents_message_cited_memories
    GROUP BY message_id
) AS cited
WHERE cited.message_id = message.id;

UPDATE agents_memoryproposal AS proposal
SET source_ids = sources.ids
FROM (
    SELECT memoryproposal_id, array_agg(memory_id ORDER BY id) AS ids
    FROM agents_memoryproposal_sources
    GROUP BY memoryproposal_id
) AS sources
WHERE sources.memoryproposal_id = proposal.id;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0007_sensitive_clearance"),
    ]

    operations = [
        migrations.AddField(
            model_name="memoryproposal",
            name="source_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.UUIDField(), blank=True, default=list, size=None
            ),
        ),
        migrations.AddField(
            model_name="message",
            name="source_ids",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.UUIDField(), blank=True, default=list, size=None
            ),
        ),
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
    ]
