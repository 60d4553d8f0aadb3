"""A search's transaction sent with its statements (search/statements.py: _SearchSettings, pipeline mode).

Transactional tests: outermost, with no transaction of Django's around it, a search's
BEGIN, settings and COMMIT travel with its statements. Each test checks the round
trips the search's connection made (counted where psycopg waits for the server) or
what the transaction left behind, against the same search with KEEPSAKE_SEARCH_PIPELINE
off (Django's atomic, every statement on its own).
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings
from django.utils import timezone
from psycopg import _cursor_base, _pipeline_base, generators

from memories import retrieval
from memories.models import Memory
from memories.retrieval import NO_CUTOFF, memory_search, memory_similar
from memories.search import knn_open, statements
from memories.search import settings as search_settings
from people.models import ConsentStatus
from people.services import person_set_consent
from tests.memories.search_journal import WORDS, make_journal, search, unit_vector

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def journal():
    """make_journal(): committed, as in production."""
    return make_journal()


@pytest.fixture
def round_trips(monkeypatch) -> dict[str, int]:
    """Round trips to the server made by this thread, counted where psycopg waits for an answer:
    a statement sent on its own, or a pipeline's end (its Sync: everything queued, one answer)."""
    counted = {"count": 0}
    caller = threading.current_thread()
    plain, ending = generators.execute, _pipeline_base.BasePipeline._exit_gen

    def execute(*args, **kwargs):
        if threading.current_thread() is caller:
            counted["count"] += 1
        return plain(*args, **kwargs)

    def exit_gen(self):
        if threading.current_thread() is caller:
            counted["count"] += 1
        return ending(self)

    monkeypatch.setattr(generators, "execute", execute)  # BEGIN, COMMIT: the connection's commands
    monkeypatch.setattr(_cursor_base, "execute", execute)  # a cursor's statement
    monkeypatch.setattr(_pipeline_base.BasePipeline, "_exit_gen", exit_gen)
    return counted


def _setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s)", [name])
        return cursor.fetchone()[0]


def _idle() -> bool:
    return connection.connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE


@pytest.mark.parametrize("respect_consent", [True, False])
def test_a_search_sends_its_transaction_with_its_statements_and_answers_the_same(
    journal, round_trips, respect_consent
):
    owner, _, withheld = journal
    # Both sides on this connection, so that every statement is counted here.
    with override_settings(SEARCH_SIDES_IN_PARALLEL=False):
        with override_settings(SEARCH_PIPELINE=False):
            search(owner, "lantern", respect_consent=respect_consent)  # plans, hints: not counted
            round_trips["count"] = 0
            alone = [search(owner, words, respect_consent=respect_consent) for words in WORDS]
            apart = round_trips["count"]
        search(owner, "lantern", respect_consent=respect_consent)
        round_trips["count"] = 0
        together = [search(owner, words, respect_consent=respect_consent) for words in WORDS]
        pipelined = round_trips["count"]
    assert together == alone
    assert all(hits for hits in together)
    if respect_consent:
        assert not {memory_id for hits in together for memory_id, _ in hits} & withheld
    # BEGIN, the settings, COMMIT: no round trip of their own any more (agents: 8 -> 5 a search here,
    # the full-text side on this connection; the owner 7 -> 4).
    assert apart - pipelined == 3 * len(WORDS), (apart, pipelined)
    assert _idle()


def test_the_settings_hold_for_the_statements_and_end_with_the_search(round_trips):
    server = _setting("max_parallel_workers_per_gather")  # (connects first)
    assert server != "0"
    round_trips["count"] = 0
    with statements._search_transaction():
        statements._set_hnsw(ef_search=70, max_scan_tuples=5000)
        # BEGIN, the two settings' statements and this read: one round trip.
        assert _setting("hnsw.ef_search") == "70"
        assert round_trips["count"] == 1
        assert _setting("max_parallel_workers_per_gather") == "0"
        assert not _idle()  # in the search's transaction
    assert _idle()
    assert round_trips["count"] == 3  # + the second read, and COMMIT
    assert _setting("max_parallel_workers_per_gather") == server
    assert _setting("hnsw.ef_search") != "70"


def test_a_search_that_sends_nothing_costs_no_round_trip(round_trips):
    connection.ensure_connection()
    round_trips["count"] = 0
    with statements._search_transaction():
        pass
    assert round_trips["count"] == 0
    assert _idle()


def test_a_failed_search_is_rolled_back_and_the_connection_serves_the_next(journal):
    owner, _, _ = journal
    application = _setting("application_name")
    with pytest.raises(DatabaseError):
        with statements._search_transaction():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('application_name', 'inside a search', false)")
                cursor.execute("SELECT 1 / 0")
    assert _idle()
    # A session setting made in a transaction that was rolled back is undone.
    assert _setting("application_name") == application
    with pytest.raises(ValueError):
        with statements._search_transaction():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('application_name', 'inside a search', false)")
            raise ValueError("after a statement")
    assert _idle()
    assert _setting("application_name") == application
    assert search(owner, "violin", respect_consent=True)
    # Committed, it stays (and is put back).
    with statements._search_transaction():
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('application_name', 'inside a search', false)")
    assert _setting("application_name") == "inside a search"
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('application_name', %s, false)", [application])


def test_a_search_inside_a_search_keeps_the_outer_transaction_open(journal):
    owner, _, _ = journal
    memory = Memory.objects.filter(owner=owner).first()
    with statements._search_transaction():
        statements._set_hnsw(ef_search=70, max_scan_tuples=5000)
        # Loading (the last statement of a search, which takes COMMIT with it) inside.
        assert memory_similar(memory, respect_consent=True)
        assert not _idle()
        assert _setting("hnsw.ef_search") == "70"  # SET LOCAL: still the outer transaction
    assert _idle()
    assert _setting("hnsw.ef_search") != "70"


def test_inside_a_callers_transaction_the_search_is_djangos_and_sees_its_rows(journal, round_trips):
    owner, _, _ = journal
    with transaction.atomic():
        Memory.objects.create(
            owner=owner, body="quince marmalade", occurred_at=timezone.now(), embedding=unit_vector(99)
        )
        found = memory_search(owner, "quince", query_embedding=unit_vector(99), relevance=NO_CUTOFF)
        assert [hit.memory.body for hit in found][:1] == ["quince marmalade"]
        assert statements._SearchSettings().pipelined is False
    assert _idle()


def test_a_grant_is_found_by_the_probe_read_after_the_index_statement(
    journal, monkeypatch, unbounded_index_scans
):
    """A big owner's count is trusted and the probe for rows waiting for the agents' index goes
    with the scan's settings (_set_hnsw), held back and read after the index statement."""
    owner, withheld, withheld_ids = journal
    # Through the agents' index, no exact search instead or after (tests/memories/test_consent_flip.py).
    monkeypatch.setattr(search_settings, "OPEN_HINT_TRUSTED_ABOVE", 1)
    monkeypatch.setattr(search_settings, "EXACT_CANDIDATES_MAX", 0)
    monkeypatch.setattr(search_settings, "EXACT_SEARCH_MAX_MEMORIES", 0)
    monkeypatch.setattr(search_settings, "EXACT_FALLBACK_MAX_MEMORIES", 0)
    retrieval.forget_hints()
    asked, beside = [], []
    original, unindexed = statements._set_hnsw, knn_open._unindexed_open_neighbours

    def recorded(**kwargs):
        asked.append(kwargs.get("backlog_of"))
        return original(**kwargs)

    def searched_beside(*args, **kwargs):
        rows = unindexed(*args, **kwargs)
        beside.extend(memory_id for memory_id, _ in rows)
        return rows

    monkeypatch.setattr(statements, "_set_hnsw", recorded)
    monkeypatch.setattr(knn_open, "_unindexed_open_neighbours", searched_beside)
    target = sorted(withheld_ids)[0]
    embedding = Memory.objects.get(pk=target).embedding
    with override_settings(SEARCH_SIDES_IN_PARALLEL=False):
        memory_search(owner, "nothing matches this", respect_consent=True, query_embedding=embedding)
        person_set_consent(person=withheld, status=ConsentStatus.GRANTED, actor=owner)
        hits = memory_search(
            owner,
            "nothing matches this",
            respect_consent=True,
            query_embedding=list(embedding),
            relevance=NO_CUTOFF,
        )
    assert owner.pk in asked  # the probe went with the settings
    # Not in the agents' index yet (no worker here): found beside it, because the probe said so.
    assert target in beside
    assert hits and hits[0].memory.pk == target
    assert _idle()
    retrieval.forget_hints()
