"""Benchmark the consent-gated retrieval path: latency, recall and rows against exact search.

Seeds synthetic memories (random unit vectors, clustered by default, and random
words) with COPY, one person per 1% of memories so a gated fraction is set by
flipping whole buckets' consent, then measures `_nearest_neighbours` (the vector
side every search uses) for the owner and for agents, and the whole hybrid
`memory_search`. Large loads drop the HNSW index and rebuild it afterwards: one
build is several times faster than inserting row by row into the graph.
"""

from __future__ import annotations

import time

import numpy as np
from django.conf import settings as django_settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from pgvector.django import CosineDistance

from benchmarks.options import require_positive
from benchmarks.searches import exact_fused, exact_ids, hybrid_ids, nearest_ids
from benchmarks.seeding import (
    RETRIEVAL_OWNER,
    BulkLoad,
    SeededOwner,
    Text,
    delete_bench_users,
    prewarm,
    query_vectors,
    seed_owner,
    set_gated_fraction,
    settle,
    vacuum_after_flips,
)
from benchmarks.timing import (
    Measured,
    latency_recall_columns,
    latency_recall_header,
    load_average,
    machine,
    measure,
    percentile,
    server_versions,
)
from memories import open_vectors
from memories.models import Memory
from people.models import ConsentStatus, Person

OTHER_USERNAME = "bench_retrieval_other_{index}"


def _measure_consent_change(seeded: SeededOwner) -> str:
    """Seconds to withhold and to grant consent for one person in 1% of the memories.

    A grant leaves the memories it opens out of the agents' HNSW index (searched
    exactly beside it) until memories.index_opened_gates adds them after commit:
    that task's work is timed apart, run here in this process.
    """
    from memories.gate_index import gate_rows_index_opened

    person = Person.objects.get(pk=seeded.bucket_person_ids[-1])
    memories = person.participations.count()
    timings = {}
    for status in (ConsentStatus.PENDING, ConsentStatus.GRANTED):
        started = time.perf_counter()
        with transaction.atomic():
            Person.objects.filter(pk=person.pk).update(consent_status=status)
        timings[status] = time.perf_counter() - started
    started = time.perf_counter()
    indexed, _ = gate_rows_index_opened(owner_id=seeded.user_id, max_seconds=600)
    indexing = time.perf_counter() - started
    vacuum_after_flips()
    settle()
    return (
        f"One consent change for a person in {memories} memories: withhold "
        f"{timings[ConsentStatus.PENDING]:.2f} s, grant {timings[ConsentStatus.GRANTED]:.2f} s; "
        f"then the indexing task put {indexed} into the agents' index in {indexing:.2f} s."
    )


class Command(BaseCommand):
    help = "Seed synthetic memories and measure consent-gated retrieval latency and recall."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memories", type=int, default=100_000, help="memories of the measured owner")
        parser.add_argument(
            "--gated",
            default="0.1,0.5,0.9",
            help="fractions of memories agents may NOT see; none: the owner's searches only",
        )
        parser.add_argument("--queries", type=int, default=200)
        parser.add_argument("--limit", type=int, default=10, help="k of top-k")
        parser.add_argument("--other-owners", type=int, default=0, help="other owners sharing the index")
        parser.add_argument("--other-memories", type=int, default=0, help="memories of each other owner")
        parser.add_argument(
            "--owner",
            default="",
            help="name the measured owner bench_retrieval_<OWNER> (keeps other bench owners' data)",
        )
        parser.add_argument("--distribution", choices=["clustered", "uniform"], default="clustered")
        parser.add_argument(
            "--text",
            choices=["words", "vocabulary"],
            default="words",
            help="words: English by real frequency, 10-80 words, queries of 1-6 words with some rare names; "
            "vocabulary: the old 120-word vocabulary, 15 words, two-word queries",
        )
        parser.add_argument(
            "--compare",
            action="store_true",
            help="also run the patterns people use instead (post-filtering, filtered HNSW with defaults, "
            "strict iterative scan) on the same table, queries and gate",
        )
        parser.add_argument("--seed", type=int, default=42)
        parser.add_argument(
            "--clean", action="store_true", help="delete every bench_retrieval* user and exit"
        )

    def handle(self, *args, **options) -> None:
        if options["clean"]:
            self.stdout.write(f"Deleted bench data: {delete_bench_users(RETRIEVAL_OWNER)}")
            return
        try:
            fractions = (
                []
                if options["gated"].strip() == "none"
                else [float(part) for part in options["gated"].split(",") if part.strip()]
            )
        except ValueError:
            raise CommandError("--gated takes fractions like 0.1,0.5,0.9 (or none).") from None
        if options["gated"].strip() != "none" and not fractions:
            raise CommandError("--gated takes fractions like 0.1,0.5,0.9 (or none).")
        if not all(0 <= fraction < 1 for fraction in fractions):
            raise CommandError("--gated fractions must be at least 0 and below 1.")
        require_positive(options, "memories", "queries", "limit")
        if options["other_owners"] < 0 or options["other_memories"] < 0:
            raise CommandError("--other-owners and --other-memories cannot be negative.")
        self._run(options, fractions)

    def _run(self, options: dict, fractions: list[float]) -> None:
        from memories import retrieval

        rng = np.random.default_rng(options["seed"])
        distribution, limit = options["distribution"], options["limit"]
        text = Text(options["text"], np.random.default_rng(options["seed"] + 1))
        self.stdout.write("Seeding (reused when already there)…")
        with BulkLoad(self.stdout) as bulk:
            seeded = seed_owner(
                bulk=bulk,
                username=f"{RETRIEVAL_OWNER}_{options['owner']}" if options["owner"] else RETRIEVAL_OWNER,
                memory_count=options["memories"],
                rng=rng,
                distribution=distribution,
                text=text,
                out=self.stdout,
            )
            for index in range(options["other_owners"]):
                if options["other_memories"]:
                    seed_owner(
                        bulk=bulk,
                        username=OTHER_USERNAME.format(index=index),
                        memory_count=options["other_memories"],
                        rng=rng,
                        distribution=distribution,
                        text=text,
                        out=self.stdout,
                    )
        queries = query_vectors(
            rng=rng, owner_id=seeded.user_id, count=options["queries"], distribution=distribution
        )
        self.stdout.write(prewarm())
        agent_scope = retrieval.memory_scope(seeded.user_id, respect_consent=True)
        owner_scope = retrieval.memory_scope(seeded.user_id, respect_consent=False)
        # The exact references read every gated memory: the gate planned for the whole journal.
        agent_truth = retrieval.agent_visible_memories(seeded.user_id, whole_journal=True)

        def search(scope, gated=False):
            return lambda query: nearest_ids(scope, query, owner_id=seeded.user_id, limit=limit, gated=gated)

        def exact(scope):
            return lambda query: exact_ids(scope, query, limit)

        def peer(pattern: str):
            """What people use instead, on the same table, queries and gate (--compare)."""

            def settings(iterative_scan: str) -> None:
                # pgvector's defaults: ef_search 40; iterative scan off unless asked.
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT set_config('hnsw.iterative_scan', %s, true), "
                        "set_config('hnsw.ef_search', '40', true)",
                        [iterative_scan],
                    )

            def nearest(scope, query):
                return list(
                    scope.filter(embedding__isnull=False)
                    .annotate(distance=CosineDistance("embedding", query))
                    .order_by("distance")
                    .values_list("pk", flat=True)[:limit]
                )

            def run(query):
                with transaction.atomic():
                    if pattern == "post-filter":
                        # OpenMemory-style ACL: the owner's top k, then drop what the gate refuses.
                        settings("off")
                        ids = nearest(owner_scope, query)
                        allowed = set(agent_scope.filter(pk__in=ids).values_list("pk", flat=True))
                        return [memory_id for memory_id in ids if memory_id in allowed]
                    # Filtered HNSW: the gate in the WHERE of an index-ordered query.
                    settings("strict_order" if pattern == "strict" else "off")
                    return nearest(agent_scope, query)

            return run

        words = [text.query() for _ in range(len(queries))]

        def hybrid(respect_consent):
            position = iter(range(len(queries)))

            def run(query):
                return hybrid_ids(
                    seeded.user_id, words[next(position)], query, limit=limit, gated=respect_consent
                )

            return run

        def exact_hybrid(respect_consent):
            position = iter(range(len(queries)))

            def run(query):
                scope = agent_truth if respect_consent else owner_scope
                return exact_fused(scope, words[next(position)], query, limit)

            return run

        total = Memory.objects.count()
        self.stdout.write(
            f"\n{options['memories']} memories for the measured owner ({distribution} vectors), "
            f"{options['other_owners']} other owners x {options['other_memories']}; text: {options['text']}; "
            f"{total} memories in the table.\n"
            f"{len(queries)} queries, k={limit}. {server_versions()}, "
            f"{machine()}. Latency excludes embedding the query.\n"
            f"Hybrid search's full-text side: {_text_side_runs()}.\n"
            f"Search transactions: {_search_transactions()}.\n"
            f"Agents' exact searches over thousands of open memories: {_open_vectors_kept()}.\n"
            f"Load average before measuring: {load_average()}\n"
        )
        header = f"{'gated':>6} {'query':<26} {latency_recall_header()}"

        def line(label: str, fraction: str, measured: Measured, truth: Measured | None) -> None:
            self.stdout.write(f"{fraction:>6} {label:<26} {latency_recall_columns(measured, truth, limit)}")

        def first(run) -> float:
            started = time.perf_counter()
            run(queries[0])
            return (time.perf_counter() - started) * 1000

        set_gated_fraction(seeded, 0.0)
        # The first search of this process (statements prepared, hints and caches filled on the
        # way): what a search costs right after a server starts. The table's figures are the
        # steady state that follows it.
        self.stdout.write(
            f"First search in this process: the owner's kNN {first(search(owner_scope)):.2f} ms, "
            f"hybrid {first(hybrid(False)):.2f} ms; the figures below are the steady state after it."
        )
        self.stdout.write(_measure_consent_change(seeded) + "\n")
        self.stdout.write(header)
        ungated = measure(search(owner_scope), queries)
        ungated_truth = measure(exact(owner_scope), queries)
        line("owner (ungated) knn", "-", ungated, ungated_truth)
        line(
            "owner hybrid search",
            "-",
            measure(hybrid(False), queries),
            measure(exact_hybrid(False), queries),
        )
        for fraction in fractions:
            set_gated_fraction(seeded, fraction)
            # A server past its first agents' search of this owner: over thousands of open
            # memories that search begins reading their copy on the reader thread
            # (memories/open_vectors.py), and the searches meanwhile rank in SQL.
            after_change = first(search(agent_scope, gated=True))
            open_vectors.settle()
            gated = measure(search(agent_scope, gated=True), queries)
            truth = measure(exact(agent_truth), queries)
            self.stdout.write(
                f"{fraction:>6.2f} the agents' first kNN after the change: {after_change:.2f} ms "
                "(below: the steady state)"
            )
            line("agent (gated) knn", f"{fraction:.2f}", gated, truth)
            line("exact gated (seq)", f"{fraction:.2f}", truth, truth)
            hybrid_truth = measure(exact_hybrid(True), queries)
            line("agent hybrid search", f"{fraction:.2f}", measure(hybrid(True), queries), hybrid_truth)
            if options["compare"]:
                for pattern, label in (
                    ("post-filter", "peer: post-filter top-k"),
                    ("defaults", "peer: filtered, defaults"),
                    ("strict", "peer: strict iterative"),
                ):
                    line(label, f"{fraction:.2f}", measure(peer(pattern), queries), truth)
        if not fractions:
            self.stdout.write(f"\nLoad average after measuring: {load_average()}")
            return
        set_gated_fraction(seeded, 1.0)
        zero = measure(search(agent_scope, gated=True), queries)
        line("agent knn, zero-match", "1.00", zero, None)
        line("agent hybrid, zero-match", "1.00", measure(hybrid(True), queries), None)
        set_gated_fraction(seeded, 0.0)
        ratio = percentile(zero.latencies_ms, 95) / percentile(ungated.latencies_ms, 95)
        self.stdout.write(f"\nLoad average after measuring: {load_average()}")
        self.stdout.write(f"zero-match p95 / ungated p95 = {ratio:.2f}x (target <= 3x)")
        self.stdout.write(f"Bench data kept for reuse under users {RETRIEVAL_OWNER}*; --clean removes it.")


def _text_side_runs() -> str:
    """Where a hybrid search's full-text side runs (memories.search.statements: _SideRunner)."""
    if getattr(django_settings, "SEARCH_SIDES_IN_PARALLEL", False):
        return "on the search helper's connection, beside the vector side (KEEPSAKE_SEARCH_PARALLEL)"
    return "after the vector side, on one connection (KEEPSAKE_SEARCH_PARALLEL=false)"


def _search_transactions() -> str:
    """How a search's BEGIN, settings and COMMIT reach the server (memories.search.statements:
    _SearchSettings)."""
    from memories.search import statements

    with statements._search_transaction():
        pipelined = statements._SEARCH_SETTINGS.current.pipelined
    if pipelined:
        return "sent with their statements (KEEPSAKE_SEARCH_PIPELINE)"
    return "each statement on its own (KEEPSAKE_SEARCH_PIPELINE=false, or no pipelining here)"


def _open_vectors_kept() -> str:
    """Where the agents' exact searches over many open memories rank them (memories/open_vectors.py)."""
    from memories import open_vectors

    if open_vectors.ENABLED and open_vectors.MAX_ROWS > 0:
        return (
            f"ranked on a copy kept in the process (over {open_vectors.MIN_ROWS:,} open rows, "
            f"up to {open_vectors.MAX_ROWS:,} rows kept: KEEPSAKE_SEARCH_OPEN_VECTORS_ROWS)"
        )
    return "ranked in SQL (KEEPSAKE_SEARCH_OPEN_VECTORS_ROWS=0)"
