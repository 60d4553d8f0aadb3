from django.db import migrations

# Vectors kept in the row (issue 14: where a search's time goes).
#
# pgvector's `vector` type is stored EXTERNAL: once a row passes PostgreSQL's TOAST
# threshold (~2 KB), the vector (1,536 bytes for 384 dimensions) is the first thing
# moved out of line, and a journal entry with its text and text vector usually
# passes it (763 of 1,000 bench rows with realistic text). Every distance read from
# such a row then fetches the vector through the TOAST table's index: ~6 buffers
# per row instead of 1, 3.3 ms for an exact search over 1,000 memories instead of ~1.
#
# Now the vector is MAIN (kept in the row unless nothing else can give way) and
# rows up to ~4 KB stay whole (toast_tuple_target): a long body or its text vector
# is compressed or moved out before the vector is.
#
# Existing rows keep their storage until rewritten (a new embedding, an edit of the
# vector, or `VACUUM FULL memories_memory`, which also rebuilds the indexes): nothing
# here rewrites a journal on migrate.

FORWARD = """
ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE memories_memory SET (toast_tuple_target = 4080);
"""

BACKWARD = """
ALTER TABLE memories_memory ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE memories_memory RESET (toast_tuple_target);
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0009_gate_indexed_after_grant")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
