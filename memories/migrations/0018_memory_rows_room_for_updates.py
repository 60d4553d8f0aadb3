"""memories_memory pages keep room for the row's next version (fillfactor 70).

A memory's row is written several times after it is saved: claimed for embedding, its
vector stored, its edges stamped (`edges_computed_at`), claimed and stamped again after
an edit. The claim and the stamp change no indexed column, so PostgreSQL can write the
new version beside the old one on the same page (a HOT update) and leave every index
alone — if the page has room. Full pages (the default, 100) sent ~90% of those updates
to another page, and a row version on a new page is a new entry in every index of the
table, the vector index included: each edge stamp inserted the memory's vector into the
HNSW graph a second time. With 30% of each page kept free, a 10,000-entry import with
a worker of two went from 185–196 s to ~172 s until fully searchable (docs/performance.md,
Import). It applies to pages written from now on; existing pages fill as before until
rewritten (VACUUM FULL or pg_repack, not needed for correctness).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0017_worker_rows_cascade_in_database")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory SET (fillfactor = 70);",
            reverse_sql="ALTER TABLE memories_memory RESET (fillfactor);",
        )
    ]
