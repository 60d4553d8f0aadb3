"""Plan guards: each hot statement's plan on a big table, not its time (issue #41, item 5).

One owner with 20,000 memories (COPY, as benchmarks/seeding.py seeds: clustered vectors,
words drawn by their real frequency, one person per 1% of memories), half of the people
pending for agents, a circle holding ~30% of the memories shared with half of the people
granted for it, and a member. The hot statements are the ones the product sends: each is
captured during a real search or page (an execute wrapper), then run again under
EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) with its parameters and the search's SET LOCAL
settings, and the plan is checked: the index expected is used, no big table is read
whole, and the rows read stay a small share of the table. A statement the product
prepares (statements._fetch_prepared) is checked again as a generic plan, which
PostgreSQL switches to after five executions on a connection.

Nothing here is timed: a plan is the same on a busy machine as on an idle one. The
seeded rows are committed (VACUUM needs them outside a transaction; the planner's
statistics and the visibility map are what autovacuum leaves), and the tables are
flushed at the end, as after a transactional test.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone

from memories.models import Memory
from memories.search import statements

# ~1.5 minutes of seeding under load (measured in docs/performance.md, "Plan guards"): among
# the suite's longest, and on one worker so that the module seeds once.
pytestmark = [pytest.mark.django_db, pytest.mark.longest, pytest.mark.xdist_group("plans")]

MEMORIES = 20_000
COPY_BATCH = 1_000
SHARED = 0.3  # of the memories, shared into the circle (public, so the member may see them)
# The tables a hot statement must never read whole.
BIG_TABLES = (
    "memories_memory",
    "memories_memoryparticipant",
    "memories_memorygate",
    "memories_memorytext",
    "circles_memoryshare",
)
# A 10- or 20-result statement reads a few hundred rows of a table through its indexes
# (the candidates, and the gate's probes for each); the full-text side ranks at most
# settings.TEXT_CANDIDATES_MAX (3,000) matches. Reading the owner's 20,000 rows is what
# these bounds are there to catch.
ROWS_BOUND = 1_000
TEXT_ROWS_BOUND = 3_500


@dataclass
class World:
    alice: object
    bob: object
    circle: object
    query_vector: list[float]


# --- seeding ---------------------------------------------------------------------------


def _seed(rng: np.random.Generator) -> World:
    from pgvector.psycopg import register_vector

    from benchmarks.management.commands.bench_circles import _circle
    from benchmarks.seeding import (
        BUCKETS,
        MEMORY_COPY_SQL,
        MEMORY_COPY_TYPES,
        Text,
        _own_self,
        bench_user,
        build_indexes,
        drop_indexes,
        query_vectors,
        unit_vectors,
    )
    from circles.models import MemoryShare
    from memories.gate_index import gate_rows_index_opened
    from people.models import ConsentStatus, Person, PersonConsent

    alice = bench_user("plans_alice")
    _own_self(alice)
    people = Person.objects.bulk_create(
        Person(
            owner=alice,
            display_name=f"Plans bucket {bucket:02d}",
            consent_status=ConsentStatus.PENDING if bucket < BUCKETS // 2 else ConsentStatus.GRANTED,
        )
        for bucket in range(BUCKETS)
    )
    circle, (bob_id,) = _circle(alice.pk, 2)
    PersonConsent.objects.bulk_create(
        PersonConsent(
            person=person,
            audience=circle.audience,
            status=ConsentStatus.GRANTED
            if BUCKETS // 4 <= bucket < 3 * BUCKETS // 4
            else ConsentStatus.PENDING,
        )
        for bucket, person in enumerate(people)
    )
    # Built once after the load (BulkLoad's way): faster than inserting row by row.
    definitions = drop_indexes(("memory_embedding_hnsw", "memory_gate_open_hnsw", "memory_share_open_hnsw"))
    text = Text("words", rng)
    vectors = unit_vectors(rng, MEMORIES, unit_vectors(rng, MEMORIES // 100, None))
    buckets = rng.integers(0, BUCKETS, MEMORIES)
    shared = rng.random(MEMORIES) < SHARED
    ids = [uuid.uuid4() for _ in range(MEMORIES)]
    now = timezone.now()
    connection.ensure_connection()
    raw = connection.connection
    register_vector(raw)
    # In batches: the gate's triggers refresh each statement's memories by `= ANY(array)`,
    # which for one array of 20,000 costs minutes (a pass over the gate rows per element).
    for start in range(0, MEMORIES, COPY_BATCH):
        batch = range(start, min(start + COPY_BATCH, MEMORIES))
        with transaction.atomic(), raw.cursor() as cursor:
            with cursor.copy(MEMORY_COPY_SQL) as copy:
                copy.set_types(MEMORY_COPY_TYPES)
                for row in batch:
                    title, body = text.memory()
                    sensitivity = "public" if shared[row] else "personal"
                    # One every six hours: ~14 years of journal, as a timeline pages through it.
                    occurred = now - timedelta(hours=6 * row)
                    copy.write_row(
                        (ids[row], alice.pk, title, body, occurred, now, now, "knowledge", sensitivity)
                        + (vectors[row], "plans", now, now)
                    )
            with cursor.copy(
                "COPY memories_memoryparticipant (memory_id, person_id, role) FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["uuid", "uuid", "varchar"])
                for row in batch:
                    copy.write_row((ids[row], people[buckets[row]].pk, "subject"))
    MemoryShare.objects.bulk_create(
        (
            MemoryShare(memory_id=ids[row], circle=circle, shared_by_id=alice.pk)
            for row in np.flatnonzero(shared)
        ),
        batch_size=5_000,
    )
    gate_rows_index_opened(owner_id=alice.pk, batch_size=10**9)
    with connection.cursor() as cursor:
        for table in ("memories_memoryparticipant", "memories_memorytext", "circles_memoryshare"):
            cursor.execute(f"VACUUM ANALYZE {table}")
        cursor.execute("ANALYZE people_person")
        cursor.execute("ANALYZE people_personconsent")
    build_indexes(definitions)  # VACUUM ANALYZE of the memories and their gate rows first
    with connection.cursor() as cursor:
        # build_indexes' session settings, not this worker's for the tests that follow.
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("RESET max_parallel_maintenance_workers")
    (query_vector,) = query_vectors(rng=rng, owner_id=alice.pk, count=1, distribution="clustered")
    from django.contrib.auth import get_user_model

    return World(alice, get_user_model().objects.get(pk=bob_id), circle, query_vector.tolist())


@pytest.fixture(scope="module")
def big(django_db_setup, django_db_blocker) -> Iterator[World]:
    with django_db_blocker.unblock():
        world = _seed(np.random.default_rng(41))
        try:
            yield world
        finally:
            # What a transactional test leaves: every table empty (and the dropped indexes
            # built again above).
            call_command("flush", verbosity=0, interactive=False)


# --- capturing statements and their plans ------------------------------------------------


@dataclass
class Sent:
    sql: str
    params: list
    # Sent through the engine's cursor (statements._fetch_prepared: server-side binding).
    engine: bool
    # Prepared there: PostgreSQL switches to a generic plan after five executions.
    prepared: bool


@contextlib.contextmanager
def sent_statements() -> Iterator[list[Sent]]:
    """Every statement sent on this connection meanwhile (the ORM's and the engine's own cursors)."""
    sent: list[Sent] = []

    def record(execute, sql, params, many, context):
        raw_cursor = getattr(context["cursor"], "cursor", None)
        engine = isinstance(raw_cursor, statements._SearchCursor)
        sent.append(Sent(sql, list(params or []), engine, engine and raw_cursor.prepare_statements))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield sent


def the_statement(sent: list[Sent], *markers: str) -> tuple[Sent, list[Sent]]:
    """The one statement holding every marker, and the settings statements sent before it."""
    found = [
        index for index, statement in enumerate(sent) if all(marker in statement.sql for marker in markers)
    ]
    assert len(found) == 1, [statement.sql[:200] for statement in sent]
    settings_ = [statement for statement in sent[: found[0]] if "set_config(" in statement.sql]
    return sent[found[0]], settings_


@dataclass
class Plan:
    root: dict

    def nodes(self) -> Iterator[dict]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.get("Plans", []))

    def scans(self) -> set[tuple[str, str]]:
        """(node type, relation or index name) of every scan."""
        return {
            (node["Node Type"], node.get("Index Name") or node.get("Relation Name", ""))
            for node in self.nodes()
            if node["Node Type"].endswith("Scan")
        }

    def indexes(self) -> set[str]:
        return {node["Index Name"] for node in self.nodes() if "Index Name" in node}

    def seq_scanned(self) -> set[str]:
        return {node["Relation Name"] for node in self.nodes() if node["Node Type"] == "Seq Scan"}

    def rows_read(self, table: str) -> int:
        """Rows the scans of `table` read: those they returned and those their filters removed, every loop."""
        total = 0
        for node in self.nodes():
            if node.get("Relation Name") == table and node["Node Type"].endswith("Scan"):
                read = (
                    node.get("Actual Rows", 0)
                    + node.get("Rows Removed by Filter", 0)
                    + node.get("Rows Removed by Index Recheck", 0)
                )
                total += read * node.get("Actual Loops", 1)
        return total

    def pages(self) -> int:
        return self.root.get("Shared Hit Blocks", 0) + self.root.get("Shared Read Blocks", 0)


def _json(value) -> dict:
    if isinstance(value, (str, bytes)):
        value = json.loads(value)
    return value[0]["Plan"]


EXPLAIN = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "


def explained(statement: Sent, settings_: list[Sent], *, generic: bool = False) -> Plan:
    """The plan of `statement`, run again after its settings in one transaction (a savepoint).

    As the product binds it: the engine's statements through its own cursor class
    (server-side binding), the ORM's through Django's. `generic`: PREPAREd and
    EXECUTEd with plan_cache_mode = force_generic_plan, the plan a connection keeps
    for a prepared statement after its fifth execution.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        for setting in settings_:
            cursor.execute(setting.sql, setting.params)
        if generic:
            numbered = iter(range(1, len(statement.params) + 1))
            sql = re.sub(r"%s", lambda _: f"${next(numbered)}", statement.sql).replace("%%", "%")
            cursor.execute(f"PREPARE plan_guard AS {sql}")
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            arguments = ", ".join(["%s"] * len(statement.params))
            cursor.execute(f"{EXPLAIN}EXECUTE plan_guard({arguments})", statement.params)
            (plan,) = cursor.fetchone()
            cursor.execute("DEALLOCATE plan_guard")
        elif statement.engine:
            with statements._UnpreparedSearchCursor(connection.connection) as engine_cursor:
                engine_cursor.execute(EXPLAIN + statement.sql, statement.params)
                (plan,) = engine_cursor.fetchone()
        else:
            cursor.execute(EXPLAIN + statement.sql, statement.params)
            (plan,) = cursor.fetchone()
        transaction.set_rollback(True)
    return Plan(_json(plan))


def plans_of(statement: Sent, settings_: list[Sent]) -> list[Plan]:
    """The custom plan, and for a prepared statement the generic one too."""
    plans = [explained(statement, settings_)]
    if statement.prepared:
        plans.append(explained(statement, settings_, generic=True))
    return plans


def assert_bounded(plan: Plan, *, rows: int = ROWS_BOUND) -> None:
    assert not plan.seq_scanned() & set(BIG_TABLES), plan.scans()
    for table in BIG_TABLES:
        assert plan.rows_read(table) <= rows, (table, plan.rows_read(table), plan.scans())


def table_pages(*relations: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sum(relpages) FROM pg_class WHERE relname = ANY(%s)", [list(relations)])
        return int(cursor.fetchone()[0])


# --- the guards --------------------------------------------------------------------------


def _agents_search(world: World, query: str = "garden winter") -> None:
    from memories.retrieval import NO_CUTOFF, memory_search

    memory_search(
        world.alice, query, respect_consent=True, query_embedding=world.query_vector, relevance=NO_CUTOFF
    )


def _owner_search(world: World, query: str = "time") -> None:
    from memories.retrieval import NO_CUTOFF, memory_search

    memory_search(world.alice, query, query_embedding=world.query_vector, relevance=NO_CUTOFF)


def _circle_search(world: World, query: str = "time people") -> None:
    from memories.retrieval import NO_CUTOFF
    from memories.search.circles import circle_memory_search

    circle_memory_search(
        world.circle.pk, [world.bob.pk], query, query_embedding=world.query_vector, relevance=NO_CUTOFF
    )


def test_agents_knn_walks_the_open_gate_index(big):
    # With one owner in the table (one person's instance) and sorting allowed, the planner
    # read all ~10,000 open gate rows from memory_gate_open_idx and sorted them; the
    # search turns sorting off for its index statements (knn_open._open_index_neighbours).
    with sent_statements() as sent:
        _agents_search(big)
    statement, settings_ = the_statement(
        sent, "FROM memories_memorygate", "ORDER BY embedding <=> %s::halfvec"
    )
    assert any("'enable_sort', 'off'" in setting.sql for setting in settings_)
    for plan in plans_of(statement, settings_):
        assert "memory_gate_open_hnsw" in plan.indexes(), plan.scans()
        assert_bounded(plan)
    # And only for them: the rest of the transaction sorts again.
    with connection.cursor() as cursor:
        cursor.execute("SHOW enable_sort")
        assert cursor.fetchone() == ("on",)


def test_owner_knn_walks_the_memory_index(big):
    with sent_statements() as sent:
        _owner_search(big)
    statement, settings_ = the_statement(sent, "ORDER BY visible.embedding <=> %s::vector LIMIT")
    for plan in plans_of(statement, settings_):
        assert ("Index Scan", "memory_embedding_hnsw") in plan.scans(), plan.scans()
        assert_bounded(plan)
        # An HNSW scan's reads are index pages, not rows: bounded against the table and its index.
        assert plan.pages() < table_pages("memories_memory", "memory_embedding_hnsw") / 4, plan.pages()


@pytest.mark.parametrize(
    ("search", "query", "indexes", "every"),
    [
        # Several words, for agents: the matches through a full-text index (the open rows' or all).
        (_agents_search, "time people", {"memory_text_open_gin", "memory_text_search_gin"}, False),
        # One common word, for the owner: the rows holding it twice, then the newest holding it once.
        (_owner_search, "time", {"memory_text_repeated_gin", "memory_text_recent"}, True),
    ],
    ids=["agents-several-words", "owner-one-word"],
)
def test_hybrid_text_side_reads_its_matches_through_the_text_indexes(big, search, query, indexes, every):
    with sent_statements() as sent:
        search(big, query)
    statement, settings_ = the_statement(sent, "WITH q AS NOT MATERIALIZED")
    for plan in plans_of(statement, settings_):
        used = plan.indexes() & indexes
        assert used == indexes if every else used, plan.scans()
        assert_bounded(plan, rows=TEXT_ROWS_BOUND)


def test_circle_search_walks_the_open_shares_indexes(big):
    with sent_statements() as sent:
        _circle_search(big)
    vector, settings_ = the_statement(sent, "JOIN circles_memoryshare s ON s.memory_id = visible.id")
    # Its connection's generic plan, with sorts off (circles._circle_neighbours): the plan checked here.
    assert any("'plan_cache_mode', 'force_generic_plan'" in setting.sql for setting in settings_)
    assert any("'enable_sort', 'off'" in setting.sql for setting in settings_)
    for plan in plans_of(vector, settings_):
        assert ("Index Scan", "memory_share_open_hnsw") in plan.scans(), plan.scans()
        assert_bounded(plan)
    # And only for it: the rest of the transaction plans and sorts as the server says.
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('plan_cache_mode'), current_setting('enable_sort')")
        assert cursor.fetchone() == ("auto", "on")
    text, settings_ = the_statement(sent, "WITH q AS NOT MATERIALIZED")
    for plan in plans_of(text, settings_):
        assert "memory_share_open_text" in plan.indexes(), plan.scans()
        assert_bounded(plan, rows=TEXT_ROWS_BOUND)


def test_circle_search_plans_its_index_statement_once_per_connection(big):
    # PostgreSQL left to choose kept planning it anew at every search (custom plans: ~2.2 ms
    # of planning the circle's gate, for ~2.7 ms of execution, at 100,000 memories).
    def plans() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) "
                "FROM pg_prepared_statements WHERE statement LIKE %s",
                ["%JOIN circles_memoryshare s ON s.memory_id = visible.id%"],
            )
            return tuple(int(value) for value in cursor.fetchone())

    generic, custom = plans()
    queries = ("time people", "garden winter", "letters home", "time people", "morning walk", "old friends")
    for query in queries:
        _circle_search(big, query)
    assert plans() == (generic + 6, custom)


def _page_statement(sent: list[Sent], *markers: str) -> Sent:
    """The page's own statement: its memories with LIMIT (not "On this day", which has EXTRACT)."""
    pages = [
        statement
        for statement in sent
        if statement.sql.startswith('SELECT "memories_memory"."id"')
        and " LIMIT " in statement.sql
        and "EXTRACT(" not in statement.sql
        and all(marker in statement.sql for marker in markers)
    ]
    assert len(pages) == 1, [statement.sql[:200] for statement in sent]
    return pages[0]


@pytest.mark.parametrize("page", [1, 10])
def test_timeline_page_reads_its_cards_through_the_owner_index(big, client, page):
    from memories.views import PAGE_SIZE

    (by_date,) = [index.name for index in Memory._meta.indexes if index.fields == ["owner", "-occurred_at"]]
    client.force_login(big.alice)
    with sent_statements() as sent:
        response = client.get(reverse("timeline"), {"page": page}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    plan = explained(_page_statement(sent, 'ORDER BY "memories_memory"."occurred_at" DESC'), [])
    assert ("Index Scan", by_date) in plan.scans(), plan.scans()
    # The rows before the page (OFFSET) and the page: never the owner's 20,000.
    assert_bounded(plan, rows=2 * page * PAGE_SIZE + 50)


@pytest.mark.parametrize("page", [1, 10])
def test_circle_timeline_page_walks_the_shares_newest_first(big, client, page):
    from circles.views import PAGE_SIZE

    client.force_login(big.bob)
    with sent_statements() as sent:
        response = client.get(
            reverse("circle_detail", args=[big.circle.pk]), {"page": page}, HTTP_HX_REQUEST="true"
        )
    assert response.status_code == 200
    plan = explained(_page_statement(sent, 'INNER JOIN "circles_memoryshare"'), [])
    assert ("Index Scan", "memory_share_timeline") in plan.scans(), plan.scans()
    # Half the circle's shares are blocked for Bob: about two read per card shown.
    assert_bounded(plan, rows=4 * page * PAGE_SIZE + 50)
