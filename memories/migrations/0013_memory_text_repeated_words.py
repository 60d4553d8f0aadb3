from django.db import migrations

# A one-word search ranks exactly, however many memories hold the word.
#
# ts_rank, with the search's settings (no weights set, no length normalisation),
# ranks a memory for a one-word query by how many times the word occurs in it and by
# nothing else: every memory that holds the word once ranks the same, every one that
# holds it twice above them, and so on. So the exact order (rank, then newest, then
# id) is: the memories holding the word at least twice, ranked; then those holding
# it once, newest first. memories_repeated_lexemes(text vector) is the words a memory
# holds at least twice, and two indexes over the full-text copy find each part
# without reading every match (retrieval._text_matches):
# - memory_text_repeated_gin, (owner, repeated words): the memories holding the word
#   at least twice, a few in a hundred of a common word's matches;
# - memory_text_recent, (owner, date newest first, id): the ones holding it once,
#   newest first, read until enough are found (for a common word, a few rows per match).
# Before, a word matching more than TEXT_CANDIDATES_MAX memories ranked only the first
# that many in physical order: which memories a common word found was an accident of
# storage (fused recall@10 0.83 over such queries in the bench).
#
# The function names only built-in functions (pg_catalog, found with the empty
# search_path pg_restore builds indexes with), and is immutable: an index may use it.
FORWARD = """
CREATE FUNCTION memories_repeated_lexemes(vector tsvector) RETURNS tsvector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN pg_catalog.array_to_tsvector(coalesce(
    (SELECT pg_catalog.array_agg(entry.lexeme)
     FROM pg_catalog.unnest(vector) AS entry
     WHERE pg_catalog.cardinality(entry.positions) >= 2),
    '{}'::text[]));
CREATE INDEX memory_text_repeated_gin ON memories_memorytext
    USING gin (owner_id, memories_repeated_lexemes(search_vector));
CREATE INDEX memory_text_recent ON memories_memorytext (owner_id, occurred_at DESC, memory_id);
"""

BACKWARD = """
DROP INDEX IF EXISTS memory_text_recent;
DROP INDEX IF EXISTS memory_text_repeated_gin;
DROP FUNCTION IF EXISTS memories_repeated_lexemes(tsvector);
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0012_memory_text_agents_open")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
