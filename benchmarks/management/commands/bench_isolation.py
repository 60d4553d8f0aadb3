"""One owner among many against the same owner alone, query by query in one run (issue 14 item 4).

    python manage.py bench_isolation --alone keepsake_alone [--owner small1k] [--memories 1000]
        [--gated 0.1,0.5,0.9,0.99] [--queries 200] [--text words] [--seed 42]

The database the settings name holds the owner among others (seeded by
`bench_retrieval --owner NAME --other-owners ...`); `--alone` names a database on
the same server where `bench_retrieval --owner NAME` seeded the same owner alone.
Each line runs every query on one database and then the other (which goes first
alternates), so both see the same moment of a shared, noisy machine and the ratio
compares like with like; two separate runs of a few minutes each differed by up
to 1.8x on their own. Each database keeps its own connection and its own search
hints (retrieval.hint_caches). Recall is against each database's exact answer.
Both run a hybrid search's two sides one after the other on that connection: the
search helper (memories.search.statements._SideRunner) keeps a connection to the database the settings
name, so it is switched off for the whole run rather than used on one side only.
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connections

from benchmarks.searches import exact_fused, exact_ids, hybrid_ids, nearest_ids
from benchmarks.seeding import BUCKETS, RETRIEVAL_OWNER, SeededOwner, Text, query_vectors, set_gated_fraction
from benchmarks.timing import load_average, machine, percentile, recall
from config.gc_freeze import freeze_startup_objects
from memories.models import Memory
from people.models import Person

# Queries run on each database before a line is measured (plans, caches).
WARM_UP = 10


class _Database:
    """A database the searches run on in turn: its connection and its own search hints."""

    def __init__(self, name: str) -> None:
        self.name = name
        settings_dict = {**connections["default"].settings_dict, "NAME": name}
        self.connection = connections["default"].__class__(settings_dict, alias="default")
        self.hints: tuple = tuple(copy.copy(hints) for hints in _hint_caches())

    @contextlib.contextmanager
    def active(self):
        """Searches (every `connection` of the default alias) run here, with this database's hints."""
        outer = connections["default"]
        live = _hint_caches()
        theirs = tuple(copy.copy(hints) for hints in live)
        connections["default"] = self.connection
        _put(live, self.hints)
        try:
            yield
        finally:
            self.hints = tuple(copy.copy(hints) for hints in live)
            _put(live, theirs)
            connections["default"] = outer


def _hint_caches() -> tuple:
    from memories import retrieval

    return retrieval.hint_caches()


def _put(live: tuple, saved: tuple) -> None:
    for hints, kept in zip(live, saved, strict=True):
        if isinstance(hints, list):
            hints[:] = kept
        else:
            hints.clear()
            hints.update(kept)


@dataclass
class _Side:
    latencies_ms: list[float] = field(default_factory=list)
    results: list[list] = field(default_factory=list)
    truth: list[list] = field(default_factory=list)

    def recall(self) -> float:
        return recall(self.results, self.truth)


class Command(BaseCommand):
    help = "An owner among many against the same owner alone in another database, query by query."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--alone", required=True, help="the database holding the owner alone")
        parser.add_argument("--owner", default="small1k", help="the owner is bench_retrieval_<OWNER>")
        parser.add_argument("--memories", type=int, default=1000, help="the owner's memories in both")
        parser.add_argument("--gated", default="0.1,0.5,0.9,0.99")
        parser.add_argument("--queries", type=int, default=200)
        parser.add_argument("--limit", type=int, default=10)
        parser.add_argument("--text", choices=["words", "vocabulary"], default="words")
        parser.add_argument("--seed", type=int, default=42)

    def handle(self, *args, **options) -> None:
        try:
            fractions = [float(part) for part in options["gated"].split(",") if part.strip()]
        except ValueError:
            raise CommandError("--gated takes fractions like 0.1,0.5,0.9") from None
        if not fractions or not all(0 <= fraction < 1 for fraction in fractions):
            raise CommandError("--gated takes fractions at least 0 and below 1, like 0.1,0.5,0.9")
        if options["queries"] <= 0 or options["limit"] <= 0:
            raise CommandError("--queries and --limit must be positive.")
        among_name = connections["default"].settings_dict["NAME"]
        # Like against like: neither database's searches use the search helper (see above).
        helper = settings.SEARCH_SIDES_IN_PARALLEL
        settings.SEARCH_SIDES_IN_PARALLEL = False
        alone = _Database(options["alone"])
        username = f"{RETRIEVAL_OWNER}_{options['owner']}"
        try:
            try:
                with alone.active():
                    seeded_alone = self._owner(username, options["memories"], options["alone"])
            except OperationalError as error:
                raise CommandError(f"Cannot use the database {options['alone']!r}: {error}") from None
            seeded_among = self._owner(username, options["memories"], among_name)
            self._run(options, fractions, alone=alone, seeded_alone=seeded_alone, seeded_among=seeded_among)
        finally:
            alone.connection.close()
            settings.SEARCH_SIDES_IN_PARALLEL = helper

    def _owner(self, username: str, memories: int, database: str) -> SeededOwner:
        user = get_user_model().objects.filter(username=username).first()
        people = (
            list(
                Person.objects.filter(owner=user, display_name__startswith="Bench bucket ").order_by(
                    "display_name"
                )
            )
            if user
            else []
        )
        count = Memory.objects.filter(owner=user, embedding__isnull=False).count() if user else 0
        if len(people) != BUCKETS or count != memories:
            raise CommandError(
                f"{database} has no {username} with {memories} memories: seed it with `bench_retrieval "
                f"--owner {username.removeprefix(RETRIEVAL_OWNER + '_')} --memories {memories}` "
                f"(KEEPSAKE_DATABASE_NAME={database})."
            )
        return SeededOwner(user.pk, [person.pk for person in people], count)

    def _run(self, options, fractions, *, alone: _Database, seeded_alone, seeded_among) -> None:
        from memories import retrieval

        limit = options["limit"]
        rng = np.random.default_rng(options["seed"])
        text = Text(options["text"], np.random.default_rng(options["seed"] + 1))
        # The same query vectors and words on both sides: drawn near the owner's own memories here.
        queries = query_vectors(
            rng=rng, owner_id=seeded_among.user_id, count=options["queries"], distribution="clustered"
        )
        words = [text.query() for _ in range(len(queries))]
        table_rows = Memory.objects.count()
        with alone.active():
            alone_rows = Memory.objects.count()
        self.stdout.write(
            f"{RETRIEVAL_OWNER}_{options['owner']} ({seeded_among.memory_count} memories): "
            f"{alone_rows} memories in {options['alone']}, "
            f"{table_rows} in {connections['default'].settings_dict['NAME']}.\n"
            f"{len(queries)} queries, k={limit}, each on both databases in turn; a hybrid search's "
            "full-text side after its vector side, on the same connection (no search helper). "
            f"{machine()}. Load average before: {load_average()}\n"
        )
        self.stdout.write(
            f"{'gated':>6} {'query':<14} {'alone p50':>9} {'p95':>6} {'among p50':>9} {'p95':>6} "
            f"{'ratio p50':>9} {'p95':>5} {'recall alone/among':>19}"
        )

        # Each runner: (owner id, query vector, gated, position of the query) -> ids.
        def knn(owner_id: int, query, gated: bool, position: int) -> list:
            scope = retrieval.memory_scope(owner_id, respect_consent=gated)
            return nearest_ids(scope, query, owner_id=owner_id, limit=limit, gated=gated)

        def hybrid(owner_id: int, query, gated: bool, position: int) -> list:
            return hybrid_ids(owner_id, words[position], query, limit=limit, gated=gated)

        def exact_knn(owner_id: int, query, gated: bool, position: int) -> list:
            return exact_ids(retrieval.memory_scope(owner_id, respect_consent=gated), query, limit)

        def exact_hybrid(owner_id: int, query, gated: bool, position: int) -> list:
            scope = retrieval.memory_scope(owner_id, respect_consent=gated)
            return exact_fused(scope, words[position], query, limit)

        # Side -> (where its statements run, its owner).
        sides = {
            "alone": (alone.active, seeded_alone),
            "among": (contextlib.nullcontext, seeded_among),
        }

        def set_fraction(fraction: float) -> None:
            for active, seeded in sides.values():
                with active():
                    set_gated_fraction(seeded, fraction)

        def line(label: str, fraction: str, gated: bool, run, exact) -> None:
            measured = {side: _Side() for side in sides}
            for side, (active, seeded) in sides.items():
                with active():
                    for position, query in enumerate(queries):
                        measured[side].truth.append(exact(seeded.user_id, query, gated, position))
                    for position, query in enumerate(queries[:WARM_UP]):
                        run(seeded.user_id, query, gated, position)
            freeze_startup_objects()
            for position, query in enumerate(queries):
                for side in ("alone", "among") if position % 2 == 0 else ("among", "alone"):
                    active, seeded = sides[side]
                    with active():
                        started = time.perf_counter()
                        measured[side].results.append(run(seeded.user_id, query, gated, position))
                        measured[side].latencies_ms.append((time.perf_counter() - started) * 1000)
            first, then = measured["alone"], measured["among"]
            p50 = (percentile(first.latencies_ms, 50), percentile(then.latencies_ms, 50))
            p95 = (percentile(first.latencies_ms, 95), percentile(then.latencies_ms, 95))
            self.stdout.write(
                f"{fraction:>6} {label:<14} {p50[0]:9.2f} {p95[0]:6.2f} {p50[1]:9.2f} {p95[1]:6.2f} "
                f"{p50[1] / p50[0]:9.2f} {p95[1] / p95[0]:5.2f} {first.recall():9.3f} / {then.recall():.3f}"
            )

        set_fraction(0.0)
        line("owner knn", "-", False, knn, exact_knn)
        line("owner hybrid", "-", False, hybrid, exact_hybrid)
        for fraction in fractions:
            set_fraction(fraction)
            line("agent knn", f"{fraction:.2f}", True, knn, exact_knn)
            line("agent hybrid", f"{fraction:.2f}", True, hybrid, exact_hybrid)
        set_fraction(0.0)
        self.stdout.write(f"\nLoad average after: {load_average()}")
