from django.conf import settings
from django.db import migrations, models

# The exact search over an owner's open memories (retrieval._open_candidates_neighbours)
# ranks their half-precision copies. Through memory_gate_open_idx it visited each row
# in the table (~0.8 µs a row: 7 ms for 9,000 open); with the vectors in the index
# itself it is an index-only scan (~0.5 µs a row: 4.3 ms), which makes exact search
# the cheaper answer for an owner whose journal is mostly gated (up to 15,000 open):
# the agents' HNSW index needed a wide scan there (ef_search 300, 10-14 ms) and still
# missed near-ties.


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0013_memory_text_repeated_words"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="memorygate",
            index=models.Index(
                condition=models.Q(("blocked_count", 0), ("embedding__isnull", False)),
                fields=["owner", "memory"],
                include=("embedding",),
                name="memory_gate_open_vectors",
            ),
        ),
    ]
