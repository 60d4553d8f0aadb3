"""The benches' synthetic journals, their indexes, and the state they are measured in.

An owner is seeded with COPY: synthetic memories (random unit vectors, clustered
by default, and random words), one person per 1% of memories so a gated fraction
is set by flipping whole buckets' consent. Large loads drop the HNSW indexes and
build them again afterwards (BulkLoad): one build is several times faster than
inserting row by row into the graph. Seeded owners are kept for reuse and found
again by their username; delete_bench_users removes them.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.utils import timezone
from pgvector.psycopg import register_vector

from memories.models import EMBEDDING_DIMENSIONS, Memory
from people.models import ConsentStatus, Person

# The owner bench_retrieval seeds and measures; bench_circles and bench_isolation measure it too.
RETRIEVAL_OWNER = "bench_retrieval"
BUCKETS = 100  # one person per 1% of memories: a gated fraction is set by flipping buckets
COPY_BATCH = 5_000
# Seeding at least this many rows rebuilds the HNSW index after the load.
REBUILD_INDEX_FROM = 10_000
# Setting a gated fraction that opens or closes at most this many gate rows
# updates the agents' index in place rather than rebuilding it.
IN_PLACE_FLIP_MAX_ROWS = 20_000
# The two vector indexes: all memories (the owner's searches) and the memories
# nothing blocks (agents' searches, a partial index on the gate table).
HNSW_INDEXES = ("memory_embedding_hnsw", "memory_gate_open_hnsw")
# What a search reads, loaded into shared buffers before measuring (prewarm).
PREWARMED = (
    "memories_memory",
    "memory_embedding_hnsw",
    "memories_memoryparticipant",
    "one_role_per_person_per_memory",
    "people_person",
    "memories_memorygate",
    "memory_gate_open_idx",
    "memory_gate_open_hnsw",
    "memory_gate_open_vectors",
    "memories_memorytext",
    "memory_text_search_gin",
    "memory_text_open_gin",
    "memory_text_open_recent",
)
VOCABULARY = (
    "river garden birthday kitchen school hospital train beach mountain concert dinner "
    "breakfast letter phone walk dog cat grandmother grandfather sister brother friend "
    "teacher doctor market bakery library museum park rain snow summer winter autumn "
    "spring holiday wedding funeral party game football piano guitar song book film "
    "coffee tea cake bread soup bicycle car bus airport hotel village city forest lake "
    "island bridge church festival picnic camping fishing sailing painting drawing "
    "photograph camera laugh cry promise secret gift surprise lesson exam job interview "
    "office meeting project deadline move house flat neighbour storm sunset sunrise star "
    "moon candle lantern quilt recipe pie soup harvest orchard apple pear plum"
).split()

# A memory row as the benches (and tests/memories/test_plans.py) COPY it in binary.
MEMORY_COPY_SQL = (
    "COPY memories_memory (id, owner_id, title, body, occurred_at, created_at, updated_at, "
    "kind, sensitivity, embedding, embedding_model, embedded_at, edges_computed_at) "
    "FROM STDIN WITH (FORMAT BINARY)"
)
MEMORY_COPY_TYPES = ["uuid", "int4", "varchar", "text", "timestamptz", "timestamptz", "timestamptz"] + [
    "varchar",
    "varchar",
    "vector",
    "varchar",
    "timestamptz",
    "timestamptz",
]


# Realistic text (--text words): English words drawn by their real frequency
# (wordfreq's list, which ships its data: nothing is downloaded), journal-like
# lengths, and a few rare names; queries are drawn the same way.
WORDS_TOP_N = 30_000
BODY_WORDS = (10, 80)
QUERY_WORDS = (1, 6)
RARE_NAMES = (
    "Anneliese Bartholomew Cosima Dervla Eudora Fenwick Gwendolyn Horatio Ignatius Jolyon "
    "Kasimir Leocadia Marisol Nerys Oisin Perpetua Quillon Rosalind Saoirse Thaddeus"
).split()


class Text:
    """Seeded text and query words for one --text mode."""

    def __init__(self, mode: str, rng: np.random.Generator, *, vectors: str = "synthetic") -> None:
        # vectors: "synthetic" (random unit vectors around topic centroids, fast to
        # seed) or "model" (each seeded text embedded by the real model: queries
        # embedded from words then land where the texts they match do).
        self.mode, self.rng, self.vectors = mode, rng, vectors
        if mode == "words":
            from wordfreq import top_n_list, word_frequency

            words = [word for word in top_n_list("en", WORDS_TOP_N) if word.isalpha()]
            weights = np.array([word_frequency(word, "en") for word in words], dtype=np.float64)
            self.words = np.array(words + RARE_NAMES)
            # A rare name appears in about 1 of 20,000 words.
            weights = np.concatenate([weights / weights.sum(), np.full(len(RARE_NAMES), 1 / 20_000)])
            self.cumulative = np.cumsum(weights / weights.sum())
        else:
            self.words, self.cumulative = np.array(VOCABULARY), None

    @property
    def marker(self) -> str:
        """What embedding_model says of seeded rows, so a reseed happens when the mode changes."""
        if self.vectors == "model":
            return f"bench-model-{self.mode}"
        return "bench-random" if self.mode == "vocabulary" else f"bench-random-{self.mode}"

    def _draw(self, count: int) -> list[str]:
        if self.cumulative is None:
            return list(self.rng.choice(self.words, size=count))
        # Inverse-CDF sampling: rng.choice(p=...) would rebuild the CDF on every call.
        picks = np.searchsorted(self.cumulative, self.rng.random(count), side="right")
        return list(self.words[np.minimum(picks, len(self.words) - 1)])

    def memory(self) -> tuple[str, str]:
        if self.mode == "vocabulary":
            text = self._draw(15)
            return " ".join(text[:3]), " ".join(text[3:])
        length = int(self.rng.integers(BODY_WORDS[0], BODY_WORDS[1] + 1))
        text = self._draw(length + 3)
        return " ".join(text[:3]), " ".join(text[3:])

    def query(self) -> str:
        if self.mode == "vocabulary":
            return " ".join(self._draw(2))
        length = int(self.rng.integers(QUERY_WORDS[0], QUERY_WORDS[1] + 1))
        words = self._draw(length)
        if self.rng.random() < 0.2:  # some questions name someone rare
            words[-1] = str(self.rng.choice(RARE_NAMES))
        return " ".join(words)


@dataclass(frozen=True)
class SeededOwner:
    user_id: int
    bucket_person_ids: list[uuid.UUID]
    memory_count: int


def unit_vectors(rng: np.random.Generator, count: int, centroids: np.ndarray | None) -> np.ndarray:
    """Random unit vectors; around shared centroids when given (topic-like structure)."""
    noise = rng.standard_normal((count, EMBEDDING_DIMENSIONS)).astype(np.float32)
    if centroids is None:
        vectors = noise
    else:
        # Noise of norm ~1 around a unit centroid: members of a topic sit at cosine ~0.5
        # from each other, roughly what all-MiniLM gives for texts on one subject.
        picks = centroids[rng.integers(0, len(centroids), count)]
        vectors = picks + noise / np.sqrt(EMBEDDING_DIMENSIONS)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _centroids(rng: np.random.Generator, memory_count: int, distribution: str) -> np.ndarray | None:
    if distribution == "uniform":
        return None
    return unit_vectors(rng, max(1, memory_count // 100), None)


def bench_user(username: str):
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user


def _own_self(user) -> None:
    """The owner's Self, granted, as sign-up makes it (the gate reads it for every search)."""
    from people.services import person_create_self

    if not Person.objects.filter(owner=user, is_self=True).exists():
        person_create_self(owner=user)


def seed_owner(
    *,
    bulk: BulkLoad,
    username: str,
    memory_count: int,
    rng: np.random.Generator,
    distribution: str,
    text: Text,
    out,
) -> SeededOwner:
    user = bench_user(username)
    people = list(
        Person.objects.filter(owner=user, display_name__startswith="Bench bucket ").order_by("display_name")
    )
    existing = Memory.objects.filter(owner=user, embedding__isnull=False).count()
    same_text = not Memory.objects.filter(owner=user).exclude(embedding_model=text.marker).exists()
    if len(people) == BUCKETS and existing == memory_count and same_text:
        out.write(f"  reusing {existing} memories of {username}")
        restore_missing_indexes(bulk)
        _own_self(user)
        _index_open_rows(bulk, user.pk)
        return SeededOwner(user.pk, [person.pk for person in people], existing)
    with transaction.atomic():
        Memory.objects.filter(owner=user).delete()
        Person.objects.filter(owner=user).delete()
        people = Person.objects.bulk_create(
            Person(
                owner=user, display_name=f"Bench bucket {bucket:02d}", consent_status=ConsentStatus.GRANTED
            )
            for bucket in range(BUCKETS)
        )
        _own_self(user)
    centroids = _centroids(rng, memory_count, distribution)
    now = timezone.now()
    connection.ensure_connection()
    raw = connection.connection
    register_vector(raw)
    started = time.perf_counter()
    # A bulk load rebuilds the vector indexes, unless the table already holds ten
    # times as much (an owner added beside a million rows goes in row by row).
    if memory_count >= max(REBUILD_INDEX_FROM, _table_rows() // 10):
        bulk.drop_index()
    _copy_memories(
        raw=raw,
        user=user,
        people=people,
        memory_count=memory_count,
        rng=rng,
        centroids=centroids,
        now=now,
        started=started,
        username=username,
        text=text,
        out=out,
    )
    with connection.cursor() as cursor:
        # What autovacuum would do soon anyway: statistics for the planner and the
        # visibility map that lets the owner-size check be an index-only scan.
        for table in (
            "memories_memory",
            "memories_memoryparticipant",
            "people_person",
            "memories_memorygate",
        ):
            cursor.execute(f"VACUUM ANALYZE {table}")
    _index_open_rows(bulk, user.pk)
    out.write(f"  seeded {memory_count} memories in {time.perf_counter() - started:.0f} s")
    return SeededOwner(user.pk, [person.pk for person in people], memory_count)


def seed_one_owner(
    options: dict,
    *,
    username: str,
    text: Text | None = None,
    distribution: str = "clustered",
    out,
) -> tuple[np.random.Generator, Text, SeededOwner]:
    """seed_owner for a bench that measures one owner, any index it dropped built again at the end.

    As the bench's options say: --memories rows drawn with --seed, and (unless `text` is
    given) --text drawn with --seed + 1. The rows' generator is returned with the text:
    the bench's queries go on drawing from it.
    """
    rng = np.random.default_rng(options["seed"])
    if text is None:
        text = Text(options["text"], np.random.default_rng(options["seed"] + 1))
    out.write("Seeding (reused when already there)…")
    with BulkLoad(out) as bulk:
        seeded = seed_owner(
            bulk=bulk,
            username=username,
            memory_count=options["memories"],
            rng=rng,
            distribution=distribution,
            text=text,
            out=out,
        )
    return rng, text, seeded


def _index_open_rows(bulk: BulkLoad, owner_id: int) -> None:
    """Put the owner's open rows into the agents' index, as memories.index_opened_gates would.

    Seeded rows are open but not yet indexed (the participants arrive after the
    memories); without this every other owner would be missing from the agents'
    index, and a search beside them would look easier than it is. Many rows: with
    the index dropped and built again (BulkLoad); few: in place.
    """
    if unindexed_open_rows(owner_id) > IN_PLACE_FLIP_MAX_ROWS:
        bulk.drop_index(("memory_gate_open_hnsw",))
    _index_opened(owner_id)


def unindexed_open_rows(owner_id: int) -> int:
    """The owner's open rows not yet in the agents' index (fresh seeding leaves them so)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM memories_memorygate WHERE owner_id = %s AND blocked_count = 0 "
            "AND embedding IS NOT NULL AND NOT indexed",
            [owner_id],
        )
        return cursor.fetchone()[0]


def _table_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE relname = %s", ["memories_memory"]
        )
        return cursor.fetchone()[0]


class BulkLoad:
    """Drops HNSW indexes before the first large load and builds them once at the end (even on error)."""

    def __init__(self, out) -> None:
        self.out, self.dropped, self.definitions = out, set(), []

    def __enter__(self) -> BulkLoad:
        return self

    def drop_index(self, names: tuple[str, ...] = HNSW_INDEXES) -> None:
        names = tuple(name for name in names if name not in self.dropped)
        self.dropped.update(names)
        self.definitions += drop_indexes(names)

    def __exit__(self, *exc) -> None:
        if self.definitions:
            build_indexes(self.definitions, self.out)


def restore_missing_indexes(bulk: BulkLoad) -> None:
    """An index a bench dropped to load faster and never built again (it was stopped
    mid-build): built again from the model's definition, with the others BulkLoad builds."""
    from django.apps import apps

    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()")
        present = {row[0] for row in cursor.fetchall()}
    for model in (apps.get_model("memories", "Memory"), apps.get_model("memories", "MemoryGate")):
        for index in model._meta.indexes:
            if index.name in present or index.name in bulk.dropped:
                continue
            with connection.schema_editor(collect_sql=True) as editor:
                editor.add_index(model, index)
            bulk.dropped.add(index.name)
            bulk.definitions += [str(sql).rstrip(";").replace('"', "") for sql in editor.collected_sql]


def drop_indexes(names: tuple[str, ...]) -> list[str]:
    definitions = []
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
            row = cursor.fetchone()
            if row is not None:
                definitions.append(row[0])
                cursor.execute(f'DROP INDEX "{name}"')
    return definitions


def build_indexes(definitions: list[str], out=None) -> None:
    # Vacuum first: CREATE INDEX also indexes rows that only just died (a consent
    # flip's old gate rows still satisfy "blocked_count = 0"), and removing tens of
    # thousands of entries from an HNSW graph afterwards costs minutes of repairs.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory")
        cursor.execute("VACUUM ANALYZE memories_memorygate")
    for definition in definitions:
        started = time.perf_counter()
        with connection.cursor() as cursor:
            # The build is fastest when the graph fits in memory (config/embedded.py
            # raises the server default too); two cores, one helper process.
            cursor.execute(f"SET maintenance_work_mem = '{_maintenance_work_mem_mb()}MB'")
            cursor.execute("SET max_parallel_maintenance_workers = 1")
            cursor.execute(definition)
            cursor.execute(f"ANALYZE {definition.split()[4]}")
        if out is not None:
            out.write(f"  built {definition.split()[2]} in {time.perf_counter() - started:.0f} s")
    # A fresh build is written past shared buffers: load it, as prewarm did the rest.
    prewarm(tuple(definition.split()[2] for definition in definitions))


def _maintenance_work_mem_mb() -> int:
    """A sixth of the machine's memory, 1 to 4 GiB: a million vectors' graph needs ~2 GiB."""
    total_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    return min(max(total_mb // 6, 1024), 4096)


def _copy_memories(
    *, raw, user, people, memory_count, rng, centroids, now, started, username, text: Text, out
) -> None:
    for start in range(0, memory_count, COPY_BATCH):
        count = min(COPY_BATCH, memory_count - start)
        texts = [text.memory() for _ in range(count)]
        vectors = unit_vectors(rng, count, centroids)
        if text.vectors == "model":
            from memories.embeddings import embed_texts
            from memories.services import _embedding_input

            out.write(f"  {username}: embedding {count} texts with the model…")
            vectors = embed_texts([_embedding_input(title=title, body=body) for title, body in texts])
        buckets = rng.integers(0, BUCKETS, count)
        ids = [uuid.uuid4() for _ in range(count)]
        with transaction.atomic(), raw.cursor() as cursor:
            with cursor.copy(MEMORY_COPY_SQL) as copy:
                copy.set_types(MEMORY_COPY_TYPES)
                for row in range(count):
                    title, body = texts[row]
                    occurred = now - timedelta(minutes=int(start + row))
                    copy.write_row(
                        (
                            ids[row],
                            user.pk,
                            title,
                            body,
                            occurred,
                            now,
                            now,
                            "knowledge",
                            "personal",
                            vectors[row],
                            text.marker,
                            now,
                            # No edges on purpose: marked computed so the workers' sweep
                            # does not queue 100k edge jobs for synthetic data.
                            now,
                        )
                    )
            with cursor.copy(
                "COPY memories_memoryparticipant (memory_id, person_id, role) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "uuid", "varchar"])
                for row in range(count):
                    copy.write_row((ids[row], people[buckets[row]].pk, "subject"))
        done = start + count
        rate = done / (time.perf_counter() - started)
        out.write(f"  {username}: {done}/{memory_count} memories ({rate:.0f}/s)")


def set_gated_fraction(seeded: SeededOwner, fraction: float) -> None:
    """Make `fraction` of the owner's memories fail the gate (whole 1% buckets).

    Flipping many buckets at once is a bulk change (tens of thousands of gate rows
    leave or join the agents' index): like the seeding, it drops that index and
    builds it again afterwards, which leaves the state a vacuumed index would
    reach. An owner of at most IN_PLACE_FLIP_MAX_ROWS memories changes the index
    in place, then VACUUM. What one ordinary consent change costs is measured apart
    (bench_retrieval._measure_consent_change).
    """
    from memories import retrieval

    # The search's per-process hints describe the state before: a server reads
    # them again within a minute, the measurement starts now.
    retrieval.forget_hints()
    pending = round(fraction * BUCKETS)
    unindexed = unindexed_open_rows(seeded.user_id)
    changing = (
        Person.objects.filter(pk__in=seeded.bucket_person_ids[:pending])
        .exclude(consent_status=ConsentStatus.PENDING)
        .exists()
        or Person.objects.filter(pk__in=seeded.bucket_person_ids[pending:])
        .exclude(consent_status=ConsentStatus.GRANTED)
        .exists()
    )
    if not changing and not unindexed:
        return  # already so: nothing to rebuild
    if seeded.memory_count + unindexed <= IN_PLACE_FLIP_MAX_ROWS:
        # A small owner beside much bigger ones: rebuilding the
        # agents' index over every owner would take minutes; the index takes the
        # change in place as a consent change does, and VACUUM clears what left it.
        _flip_buckets(seeded, pending)
        vacuum_after_flips()
        settle()
        return
    # The open rows' copies too: tens of thousands of rows leaving and joining it flip
    # after flip leave the btree mostly empty pages (252 MB for 20,000 entries after
    # four), and the planner, reckoning pages per entry from its size, then reads
    # the rows from the table instead. Ordinary consent changes reuse those pages.
    definitions = drop_indexes(("memory_gate_open_hnsw", "memory_gate_open_vectors"))
    try:
        _flip_buckets(seeded, pending)
    finally:
        build_indexes(definitions)
    settle()


def vacuum_after_flips() -> None:
    """What autovacuum does after consent changes, done before measuring: the gate rows and the
    text copies (agents_open) the flip rewrote.

    INDEX_CLEANUP ON: when few of a table's pages hold dead rows, VACUUM skips the
    indexes and leaves those pages out of the visibility map, so index-only scans
    read the heap for them (in a table of a million, a small owner's open count read
    503 heap rows: 0.6-0.85 ms instead of ~0.3); autovacuum clears them once more
    dead rows gather.
    """
    with connection.cursor() as cursor:
        for table in ("memories_memorygate", "memories_memorytext"):
            cursor.execute(f"VACUUM (ANALYZE, INDEX_CLEANUP ON) {table}")


def settle(relations: tuple[str, ...] = PREWARMED) -> None:
    """Before measuring again after index builds and bulk changes: write out what they left
    dirty (CHECKPOINT; skipped where the role may not), so that checkpoint does not land inside
    the measurement, and read the searched relations back into shared buffers, which a build
    fills with its own pages (the owner's kNN measured right after one: p50/p95 8-18 / 30-79 ms
    against ~4 / 7 ms warm)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    except DatabaseError:
        pass
    prewarm(relations)


def _index_opened(owner_id: int) -> None:
    """What memories.index_opened_gates does after a grant, done here at once, in one batch:
    the owner's open rows join the agents' index (inserted, or built with it)."""
    from memories.gate_index import gate_rows_index_opened

    gate_rows_index_opened(owner_id=owner_id, batch_size=10**9)


def _flip_buckets(seeded: SeededOwner, pending: int) -> None:
    """The first `pending` buckets' people pending, the rest granted."""
    Person.objects.filter(pk__in=seeded.bucket_person_ids[:pending]).update(
        consent_status=ConsentStatus.PENDING
    )
    Person.objects.filter(pk__in=seeded.bucket_person_ids[pending:]).update(
        consent_status=ConsentStatus.GRANTED
    )
    _index_opened(seeded.user_id)
    with connection.cursor() as cursor:
        # Statistics as autovacuum would leave them: planned on stale ones, the exact
        # reference once took seconds (an anti-join over every participant).
        cursor.execute("ANALYZE people_person")
        cursor.execute("ANALYZE memories_memoryparticipant")


def query_vectors(*, rng: np.random.Generator, owner_id: int, count: int, distribution: str) -> np.ndarray:
    if distribution == "uniform":
        return unit_vectors(rng, count, None)
    # A query about a topic the owner wrote about: a stored vector moved as far as
    # two memories of one topic are from each other.
    ids = sorted(
        Memory.objects.filter(owner_id=owner_id, embedding__isnull=False).values_list("pk", flat=True)
    )
    picked = [ids[index] for index in rng.choice(len(ids), size=min(count, len(ids)), replace=False)]
    stored = dict(Memory.objects.filter(pk__in=picked).values_list("pk", "embedding"))
    anchors = np.array([np.asarray(stored[memory_id], dtype=np.float32) for memory_id in picked])
    return unit_vectors(rng, len(anchors), anchors)


def prewarm(relations: tuple[str, ...] = PREWARMED) -> str:
    """Load the tables and indexes a search reads into shared buffers, when pg_prewarm exists.

    Measures the steady state of a server that has been serving searches, not the
    first queries after a restart (which read every page from the OS cache).
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'")
        if cursor.fetchone() is None:
            return "pg_prewarm not available: measuring with whatever is cached."
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        pages = 0
        for relation in relations:
            cursor.execute("SELECT pg_prewarm(%s::regclass)", [relation])
            pages += cursor.fetchone()[0]
    return f"Prewarmed {pages} pages ({pages * 8 // 1024} MB) into shared buffers with pg_prewarm."


def delete_bench_users(prefix: str) -> dict[str, int]:
    """Delete bench users whose name starts with `prefix` and everything theirs, as account
    deletion does it (portability.account_delete); returns what was deleted, by model.

    Memories first: deleting a user alone is refused, as its people cascade but a person
    still in a memory is PROTECTed (deleting people must never silently unblock a memory).
    The consent history refuses deletes except of the account being erased (people 0003).
    """
    deleted: Counter[str] = Counter()
    with transaction.atomic():
        for user in get_user_model().objects.filter(username__startswith=prefix):
            _, memories = Memory.objects.filter(owner=user).delete()
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('keepsake.erasing_account', %s, true)", [str(user.pk)])
            _, rest = get_user_model().objects.filter(pk=user.pk).delete()
            deleted.update(memories)
            deleted.update(rest)
    return dict(deleted)
