"""Benchmark a circle member's reads: circle search latency and recall, and the timeline's first page.

Seeds (or reuses) the retrieval bench's owner — synthetic memories with COPY, one
person per 1% of memories — then a circle of `--members` members into which
`--shared` of the owner's memories are shared (made public, so sensitivity lets
every member see them). A consented fraction is set by granting whole 1% buckets
for the circle's audience. Measured as a member who is not the owner, so the
whole circle rule applies: search p50/p95/p99 with recall@k against exact search
over the same gate, the hybrid circle search with recall@k against an exact fused
reference (benchmarks.searches.exact_fused: exact kNN and every full-text match
ranked, over the same gate), and the server time of the
timeline's first page (the query and loading its memories with their people).
"""

from __future__ import annotations

import numpy as np
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from benchmarks import timing
from benchmarks.options import require_positive
from benchmarks.searches import exact_fused
from benchmarks.seeding import (
    BUCKETS,
    PREWARMED,
    RETRIEVAL_OWNER,
    bench_user,
    prewarm,
    query_vectors,
    seed_one_owner,
    settle,
)
from benchmarks.timing import Measured, latency_recall_columns, latency_recall_header, load_average, measure
from circles.models import Circle, CircleMembership, MembershipRole, MemoryShare
from memories.models import Memory
from people.models import ConsentStatus, PersonConsent

CIRCLE_NAME = "Bench circle"
MEMBER_USERNAME = "bench_circles_member_{index}"
TIMELINE_PAGE = 20
# What a circle's searches and timeline read besides the memories' relations.
CIRCLE_PREWARMED = (
    *PREWARMED,
    "circles_memoryshare",
    "memory_share_open_idx",
    "memory_share_open_vectors",
    "memory_share_open_hnsw",
    "memory_share_open_text",
    "memory_share_blocked_text",
    "memory_share_timeline",
    "memory_share_circle_idx",
)


def _circle(owner_id: int, members: int) -> tuple[Circle, list[int]]:
    circle, _ = Circle.objects.get_or_create(owner_id=owner_id, name=CIRCLE_NAME)
    CircleMembership.objects.get_or_create(
        circle=circle, user_id=owner_id, defaults={"role": MembershipRole.OWNER}
    )
    member_ids = []
    for index in range(members - 1):
        user = bench_user(MEMBER_USERNAME.format(index=index))
        CircleMembership.objects.get_or_create(circle=circle, user=user)
        member_ids.append(user.pk)
    return circle, member_ids


def _share(circle: Circle, owner_id: int, count: int, rng: np.random.Generator, out) -> int:
    existing = MemoryShare.objects.filter(circle=circle).count()
    if existing == count:
        out.write(f"  reusing {existing} shares")
        return existing
    MemoryShare.objects.filter(circle=circle).delete()
    ids = sorted(Memory.objects.filter(owner_id=owner_id).values_list("pk", flat=True))
    picked = [ids[index] for index in rng.choice(len(ids), size=min(count, len(ids)), replace=False)]
    with transaction.atomic():
        MemoryShare.objects.bulk_create(
            (MemoryShare(memory_id=memory_id, circle=circle, shared_by_id=owner_id) for memory_id in picked),
            batch_size=5_000,
        )
        Memory.objects.filter(pk__in=picked).update(sensitivity="public")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE circles_memoryshare")
        cursor.execute("VACUUM ANALYZE memories_memory")
    out.write(f"  shared {len(picked)} memories into the circle")
    return len(picked)


def _set_consented_fraction(
    circle: Circle, bucket_person_ids: list, fraction: float, *, vacuum: bool
) -> None:
    granted = round(fraction * BUCKETS)
    PersonConsent.objects.filter(audience=circle.audience).delete()
    PersonConsent.objects.bulk_create(
        PersonConsent(
            person_id=person_id,
            audience=circle.audience,
            status=ConsentStatus.GRANTED if index < granted else ConsentStatus.PENDING,
        )
        for index, person_id in enumerate(bucket_person_ids)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE people_personconsent")
        # The triggers rewrote the shares' counts in bulk: what autovacuum would do
        # next (statistics for the planner, dead rows out of the indexes, the visibility
        # map index-only scans read). --no-vacuum measures before it has.
        if vacuum:
            cursor.execute("VACUUM (ANALYZE, INDEX_CLEANUP ON) circles_memoryshare")
        else:
            cursor.execute("ANALYZE circles_memoryshare")


class Command(BaseCommand):
    help = "Measure circle search (latency, recall@k) and the circle timeline for a member."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--memories", type=int, default=100_000, help="memories of the circle's owner")
        parser.add_argument("--shared", type=int, default=20_000, help="of which shared into the circle")
        parser.add_argument("--members", type=int, default=30)
        parser.add_argument("--consented", default="0.1,0.5,0.9", help="fractions granted for the circle")
        parser.add_argument("--queries", type=int, default=100)
        parser.add_argument(
            "--no-vacuum",
            dest="vacuum",
            action="store_false",
            help="measure right after each consent change, before any vacuum of the shares",
        )
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument(
            "--text",
            choices=["words", "vocabulary"],
            default="words",
            help="the owner's seeded text and the queries (see bench_retrieval --text)",
        )

    def handle(self, *args, **options) -> None:
        try:
            fractions = [float(part) for part in options["consented"].split(",") if part.strip()]
        except ValueError:
            raise CommandError("--consented takes fractions like 0.1,0.5,0.9.") from None
        if not fractions or not all(0 < fraction <= 1 for fraction in fractions):
            raise CommandError("--consented fractions must be above 0 and at most 1.")
        require_positive(options, "memories", "shared", "members", "queries", "limit")
        if options["shared"] > options["memories"]:
            raise CommandError("--shared cannot exceed --memories.")
        if not 2 <= options["members"] <= 50:
            raise CommandError("--members is from 2 to 50 (a circle holds at most 50).")
        self._run(options, fractions)

    def _run(self, options: dict, fractions: list[float]) -> None:
        from memories import gate, retrieval
        from memories.search import circles, statements
        from memories.search import knn as search_knn  # (knn below: the bench's own)

        limit = options["limit"]
        rng, text, seeded = seed_one_owner(options, username=RETRIEVAL_OWNER, out=self.stdout)
        circle, member_ids = _circle(seeded.user_id, options["members"])
        shared = _share(circle, seeded.user_id, options["shared"], rng, self.stdout)
        viewer = [member_ids[0]]
        queries = query_vectors(
            rng=rng, owner_id=seeded.user_id, count=options["queries"], distribution="clustered"
        )
        self.stdout.write(prewarm(CIRCLE_PREWARMED))
        self.stdout.write(
            f"\nCircle of {options['members']} members; the owner has {seeded.memory_count} memories, "
            f"{shared} shared into the circle (public). Measured as a member who is not the owner.\n"
            f"{len(queries)} queries, k={limit}. Latency excludes embedding the query.\n"
            f"{timing.machine()}. Load average before measuring: {load_average()}\n"
            + (
                "Measured after VACUUM of the shares following each consent change.\n"
                if options["vacuum"]
                else "Measured right after each consent change: no vacuum of the shares (--no-vacuum).\n"
            )
        )
        self.stdout.write(f"{'consented':>9} {'query':<24} {latency_recall_header()}")

        def knn(query):
            # As circle_memory_search calls it: the gate compiled once, built as a queryset on demand,
            # in a search's own transaction (no parallel workers).
            with statements._search_transaction():
                return [
                    memory_id
                    for memory_id, _ in circles._circle_neighbours(
                        lambda: retrieval.circle_visible_memories(circle.pk, viewer),
                        query,
                        visible=gate._compiled_circle_scope(
                            circle.pk, viewer, for_agent=False, read_by_several=False
                        ),
                        circle_id=circle.pk,
                        viewers=viewer,
                        limit=limit,
                    )
                ]

        def exact(query):
            with transaction.atomic():
                scope = retrieval.circle_visible_memories(circle.pk, viewer)
                return [memory_id for memory_id, _ in search_knn._exact_neighbours(scope, query, limit)]

        words = [text.query() for _ in range(len(queries))]

        def hybrid():
            position = iter(range(len(queries)))

            def run(query):
                hits = retrieval.circle_memory_search(
                    circle.pk,
                    viewer,
                    words[next(position)],
                    limit=limit,
                    query_embedding=query,
                    # Random vectors are all far apart: measure the search, not the cut-off.
                    relevance=retrieval.NO_CUTOFF,
                )
                return [hit.memory.pk for hit in hits]

            return run

        def exact_hybrid():
            position = iter(range(len(queries)))

            def run(query):
                scope = retrieval.circle_visible_memories(circle.pk, viewer)
                return exact_fused(scope, words[next(position)], query, limit)

            return run

        def timeline(_query):
            return [
                memory.pk for memory in retrieval.circle_memory_timeline(circle.pk, viewer)[:TIMELINE_PAGE]
            ]

        def line(label: str, fraction: float, measured: Measured, truth: Measured | None, asked: int) -> None:
            self.stdout.write(
                f"{fraction:>9.2f} {label:<24} {latency_recall_columns(measured, truth, asked)}"
            )

        for fraction in fractions:
            _set_consented_fraction(circle, seeded.bucket_person_ids, fraction, vacuum=options["vacuum"])
            settle(CIRCLE_PREWARMED)  # the flip rewrote the shares: written out, read back in
            measured = measure(knn, queries)
            truth = measure(exact, queries)
            line("circle knn", fraction, measured, truth, limit)
            line("exact (seq)", fraction, truth, truth, limit)
            line(
                "circle hybrid search",
                fraction,
                measure(hybrid(), queries),
                measure(exact_hybrid(), queries),
                limit,
            )
            line("timeline first page", fraction, measure(timeline, queries[:50]), None, TIMELINE_PAGE)
        self.stdout.write(f"\nLoad average after measuring: {load_average()}")
        self.stdout.write("Goals (issue): search p95 <= 15 ms, recall >= 0.99, timeline <= 30 ms.")
