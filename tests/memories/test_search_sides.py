"""A hybrid search's full-text side on the search helper's own connection (search/statements.py: _SideRunner).

Transactional tests: the helper reads what is committed, as in production. Each
checks where the full-text side ran (the helper thread or the caller's) and that
the search answers exactly as it does with both sides in the calling thread.
"""

from __future__ import annotations

import logging
import threading
import uuid

import pytest
from django.db import connection, transaction
from django.test import override_settings

from memories.models import Memory, MemoryParticipant
from memories.search import statements
from people.models import ConsentStatus, Person
from tests.memories.search_journal import WORDS, make_journal, search, unit_vector

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def journal():
    """make_journal(): committed, as in production."""
    owner, _, withheld_ids = make_journal()
    return owner, withheld_ids


@pytest.mark.parametrize("respect_consent", [True, False])
def test_the_full_text_side_runs_on_the_helper_and_the_answer_is_the_same(
    journal, text_side_threads, respect_consent
):
    owner, withheld = journal
    with override_settings(SEARCH_SIDES_IN_PARALLEL=False):
        alone = [search(owner, words, respect_consent=respect_consent) for words in WORDS]
    assert text_side_threads == [threading.current_thread().name] * len(WORDS)
    text_side_threads.clear()
    with override_settings(SEARCH_SIDES_IN_PARALLEL=True):
        beside = [search(owner, words, respect_consent=respect_consent) for words in WORDS]
    assert all(name.startswith("keepsake-search-side") for name in text_side_threads)
    assert len(text_side_threads) == len(WORDS)
    assert beside == alone
    found = {memory_id for hits in beside for memory_id, _ in hits}
    if respect_consent:
        assert found and not found & withheld
    else:
        assert found & withheld  # the owner sees everything recorded


@override_settings(SEARCH_SIDES_IN_PARALLEL=True)
def test_inside_a_callers_transaction_both_sides_run_here_and_see_its_rows(journal, text_side_threads):
    owner, _ = journal
    with transaction.atomic():
        memory = Memory.objects.create(
            id=uuid.uuid4(), owner=owner, body="zeppelin over the harbor", embedding=unit_vector(99)
        )
        hits = search(owner, "zeppelin", respect_consent=True)
    assert text_side_threads == [threading.current_thread().name]
    assert memory.pk in {memory_id for memory_id, _ in hits}


@override_settings(SEARCH_SIDES_IN_PARALLEL=True)
def test_while_the_helper_is_busy_the_side_runs_here(journal, text_side_threads):
    owner, _ = journal
    expected = search(owner, "violin", respect_consent=True)
    text_side_threads.clear()
    statements._SIDE_RUNNER._pool()
    busy = statements._SIDE_RUNNER._idle
    assert busy.acquire(blocking=False)
    try:
        assert search(owner, "violin", respect_consent=True) == expected
    finally:
        busy.release()
    assert text_side_threads == [threading.current_thread().name]


@override_settings(SEARCH_SIDES_IN_PARALLEL=True)
def test_when_the_helpers_connection_is_gone_the_side_runs_here_and_the_helper_reconnects(
    journal, text_side_threads, caplog
):
    owner, _ = journal
    expected = search(owner, "orchard", respect_consent=True)
    helper = statements._SIDE_RUNNER._executor.submit(
        lambda: connection.connection.info.backend_pid if connection.connection else None
    ).result()
    assert helper is not None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [helper])
    text_side_threads.clear()
    with caplog.at_level(logging.WARNING, logger="memories.search.statements"):
        assert search(owner, "orchard", respect_consent=True) == expected
    assert "running it here" in caplog.text
    assert text_side_threads[0].startswith("keepsake-search-side")
    assert text_side_threads[1:] == [threading.current_thread().name]
    text_side_threads.clear()
    assert search(owner, "orchard", respect_consent=True) == expected
    assert text_side_threads[0].startswith("keepsake-search-side")
    reconnected = statements._SIDE_RUNNER._executor.submit(
        lambda: connection.connection.info.backend_pid
    ).result()
    assert reconnected != helper


@override_settings(SEARCH_SIDES_IN_PARALLEL=True)
def test_a_revocation_committed_elsewhere_shows_on_the_next_search(journal, text_side_threads):
    owner, withheld = journal
    before = {memory_id for memory_id, _ in search(owner, "lantern orchard", respect_consent=True)}
    granted = Person.objects.get(owner=owner, display_name="Gran")
    shown = set(MemoryParticipant.objects.filter(person=granted).values_list("memory_id", flat=True))
    assert before & shown
    Person.objects.filter(pk=granted.pk).update(consent_status=ConsentStatus.REVOKED)
    after = {memory_id for memory_id, _ in search(owner, "lantern orchard", respect_consent=True)}
    assert not after & shown
    assert not after & withheld
    assert all(name.startswith("keepsake-search-side") for name in text_side_threads)


@override_settings(SEARCH_SIDES_IN_PARALLEL=True)
def test_a_connection_pointed_at_another_database_keeps_both_sides_here():
    """A bench may point this thread's default alias at another database (bench_isolation):
    the helper's connection would not follow, so the side stays with the caller."""
    from django.db import connections

    def side():
        return threading.current_thread().name

    outer = connections["default"]
    statements._SEARCH_SETTINGS.current = statements._SearchSettings()  # outermost: no transaction here
    try:
        waited = statements._SIDE_RUNNER.start(side)
        assert waited is not side and waited().startswith("keepsake-search-side")
        connections["default"] = outer.__class__({**outer.settings_dict, "NAME": "keepsake_elsewhere"})
        assert not statements._on_the_configured_database()
        assert statements._SIDE_RUNNER.start(side) is side
    finally:
        connections["default"] = outer
        statements._SEARCH_SETTINGS.current = None
    assert statements._on_the_configured_database()
