"""Copies of an owner's open vectors kept in the process (memories/open_vectors.py) and the change
rows that say whether a copy is whole (MemoryGateChange, migration 0016).

Transactional: a copy is used only in a search's own transaction, and whether it is whole
depends on which transactions have committed, as in production.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import numpy as np
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from benchmarks.searches import nearest_ids
from memories import open_vectors, retrieval
from memories.models import Memory, MemoryGate, MemoryGateChange, MemoryParticipant
from memories.search import settings as search_settings
from memories.tasks import gate_changes_prune
from people.models import ConsentStatus, Person
from tests.memories.search_journal import WORDS, make_journal, search, unit_vector

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def journal():
    """make_journal(), committed: (owner, ids of the memories with the withheld person)."""
    owner, _, withheld_ids = make_journal()
    return owner, withheld_ids


def changes(owner) -> list[int]:
    return sorted(MemoryGateChange.objects.filter(owner=owner).values_list("xid", flat=True))


def found(owner, words: str, seed: int = 7) -> set[uuid.UUID]:
    return {memory_id for memory_id, _ in search(owner, words, respect_consent=True, seed=seed)}


def test_each_transaction_that_changes_open_embedded_gate_rows_is_recorded_once(journal):
    owner, withheld = journal
    assert changes(owner)  # the journal's memories were written open and embedded
    MemoryGateChange.objects.all().delete()

    # Which index finds a row is not a change; neither is a blocked memory's new embedding.
    MemoryGate.objects.filter(owner=owner).update(indexed=False)
    Memory.objects.filter(pk=next(iter(withheld))).update(embedding=unit_vector(500))
    assert changes(owner) == []

    # A revocation, a grant, an open memory's new embedding, a deletion: one row per transaction,
    # however many statements and rows it changes.
    gran = Person.objects.get(owner=owner, display_name="Gran")
    wes = Person.objects.get(owner=owner, display_name="Wes")
    Person.objects.filter(pk=gran.pk).update(consent_status=ConsentStatus.REVOKED)
    assert len(changes(owner)) == 1
    with transaction.atomic():
        Person.objects.filter(pk=wes.pk).update(consent_status=ConsentStatus.GRANTED)
        Person.objects.filter(pk=gran.pk).update(consent_status=ConsentStatus.GRANTED)
    assert len(changes(owner)) == 2
    opened = Memory.objects.filter(owner=owner, participants__isnull=True).first()
    Memory.objects.filter(pk=opened.pk).update(embedding=unit_vector(501))
    assert len(changes(owner)) == 3
    Memory.objects.filter(pk=opened.pk).delete()
    assert len(changes(owner)) == 4
    # Rows of another owner's transactions are theirs.
    other, _, _ = make_journal()
    assert len(changes(owner)) == 4 and changes(other)


@pytest.mark.parametrize("words", WORDS)
def test_the_kept_copy_gives_the_answer_ranked_in_sql(journal, kept_open_vectors, monkeypatch, words):
    owner, withheld = journal
    monkeypatch.setattr(open_vectors, "ENABLED", False)
    expected = [search(owner, words, respect_consent=True, seed=seed) for seed in range(5)]
    assert kept_open_vectors == [(owner.pk, False)] * 5  # off: ranked in SQL
    kept_open_vectors.clear()
    monkeypatch.setattr(open_vectors, "ENABLED", True)
    kept = [search(owner, words, respect_consent=True, seed=seed) for seed in range(5)]
    assert kept == expected
    assert kept_open_vectors == [(owner.pk, True)] * 5
    assert open_vectors.kept(owner.pk) is not None
    assert not {memory_id for hits in kept for memory_id, _ in hits} & withheld


def test_a_grant_committed_after_the_copy_was_read_is_found_by_the_next_search(journal, kept_open_vectors):
    owner, withheld = journal
    before = found(owner, "lantern")
    copy = open_vectors.kept(owner.pk)
    assert copy is not None and kept_open_vectors == [(owner.pk, True)]
    assert not before & withheld

    Person.objects.filter(owner=owner, display_name="Wes").update(consent_status=ConsentStatus.GRANTED)
    after = found(owner, "lantern")
    # The copy had missed the grant: dropped, and the search ranked in SQL.
    assert kept_open_vectors[1] == (owner.pk, False)
    assert after & withheld
    # Read again on the next search (RELOAD_AFTER_SECONDS is 0 here), now with the grant in it.
    assert found(owner, "lantern") == after
    assert kept_open_vectors[2:] == [(owner.pk, True)]
    assert open_vectors.kept(owner.pk) is not copy


def test_a_copy_that_missed_a_revocation_still_never_shows_the_revoked_memories(
    journal, kept_open_vectors, monkeypatch
):
    """The copy only proposes candidates: the gate in SQL decides, even if the copy were
    wrongly believed whole."""
    owner, _ = journal
    found(owner, "orchard")
    assert kept_open_vectors == [(owner.pk, True)]
    # Believe every copy whole (the three parameters still bound).
    monkeypatch.setattr(
        open_vectors, "STALE_SQL", "(%s::bigint IS NULL AND %s::text IS NULL AND %s::text IS NULL)"
    )
    gran = Person.objects.get(owner=owner, display_name="Gran")
    revoked = set(MemoryParticipant.objects.filter(person=gran).values_list("memory_id", flat=True))
    Person.objects.filter(pk=gran.pk).update(consent_status=ConsentStatus.REVOKED)
    for seed in range(24):
        assert not found(owner, "orchard lantern", seed=seed) & revoked
    assert all(used for _, used in kept_open_vectors)


def test_inside_a_callers_transaction_the_copy_is_not_used_and_its_grant_is_found(journal, kept_open_vectors):
    owner, withheld = journal
    found(owner, "violin")
    copy = open_vectors.kept(owner.pk)
    assert copy is not None and kept_open_vectors == [(owner.pk, True)]
    with transaction.atomic():
        Person.objects.filter(owner=owner, display_name="Wes").update(consent_status=ConsentStatus.GRANTED)
        assert found(owner, "violin") & withheld
    # Not used, nor asked whether whole (which would have dropped it): ranked in SQL.
    assert kept_open_vectors == [(owner.pk, True), (owner.pk, False)]
    assert open_vectors.kept(owner.pk) is copy


def _reader_connection():
    """The reader thread's own database connection (None once closed)."""
    return open_vectors._READER._executor.submit(lambda: connection.connection).result()


def test_the_search_that_finds_no_copy_ranks_in_sql_while_the_reader_thread_reads_it(
    journal, kept_open_vectors, monkeypatch
):
    owner, withheld = journal
    monkeypatch.setattr(open_vectors, "ENABLED", False)
    expected = [search(owner, "lantern", respect_consent=True, seed=seed) for seed in range(4)]
    kept_open_vectors.clear()
    monkeypatch.setattr(open_vectors, "ENABLED", True)
    monkeypatch.setattr(open_vectors, "READ_IN_BACKGROUND", True)  # as a server reads them
    read_in: list[str] = []
    read = open_vectors._read

    def recorded(owner_id):
        read_in.append(threading.current_thread().name)
        return read(owner_id)

    monkeypatch.setattr(open_vectors, "_read", recorded)
    first = search(owner, "lantern", respect_consent=True, seed=0)
    open_vectors.settle()
    # The search did not wait for the copy: it ranked in SQL, and the reader thread read it.
    assert kept_open_vectors == [(owner.pk, False)]
    assert len(read_in) == 1 and read_in[0].startswith("keepsake-open-vectors")
    assert open_vectors.kept(owner.pk) is not None
    # The next searches answer from it, as SQL does; the reader's connection was closed.
    later = [search(owner, "lantern", respect_consent=True, seed=seed) for seed in range(1, 4)]
    assert [first, *later] == expected
    assert kept_open_vectors[1:] == [(owner.pk, True)] * 3
    assert len(read_in) == 1
    assert _reader_connection() is None
    assert not {memory_id for hits in expected for memory_id, _ in hits} & withheld


def test_a_read_that_fails_on_the_reader_thread_is_logged_and_the_searches_rank_in_sql(
    journal, kept_open_vectors, monkeypatch, caplog
):
    owner, _ = journal
    monkeypatch.setattr(open_vectors, "READ_IN_BACKGROUND", True)
    load_sql = open_vectors._LOAD_SQL
    monkeypatch.setattr(open_vectors, "_LOAD_SQL", load_sql.replace("count(*)", "count(*) / 0"))
    with caplog.at_level("WARNING", logger="memories.open_vectors"):
        expected = search(owner, "orchard", respect_consent=True)
        open_vectors.settle()
    assert f"Reading the open vectors of owner {owner.pk} failed" in caplog.text
    assert open_vectors.kept(owner.pk) is None
    assert _reader_connection() is None  # closed after the failure: the next read starts afresh
    assert search(owner, "orchard", respect_consent=True) == expected
    open_vectors.settle()  # its read (RELOAD_AFTER_SECONDS is 0 here) failed too
    assert open_vectors.kept(owner.pk) is None
    assert kept_open_vectors == [(owner.pk, False), (owner.pk, False)]
    # Mended (a server back), the next search's read keeps the copy, and the one after uses it.
    monkeypatch.setattr(open_vectors, "_LOAD_SQL", load_sql)
    search(owner, "orchard", respect_consent=True)
    open_vectors.settle()
    assert open_vectors.kept(owner.pk) is not None
    assert search(owner, "orchard", respect_consent=True) == expected
    assert kept_open_vectors[2:] == [(owner.pk, False), (owner.pk, True)]


def test_a_copy_is_read_again_at_most_every_reload_interval(journal, kept_open_vectors, monkeypatch):
    owner, withheld = journal
    monkeypatch.setattr(open_vectors, "RELOAD_AFTER_SECONDS", 3600.0)
    found(owner, "harbor")
    Person.objects.filter(owner=owner, display_name="Wes").update(consent_status=ConsentStatus.GRANTED)
    for _ in range(3):
        assert found(owner, "harbor") & withheld  # ranked in SQL, the grant seen
    assert kept_open_vectors == [(owner.pk, True)] + [(owner.pk, False)] * 3
    assert open_vectors.kept(owner.pk) is None


def test_with_no_rows_to_keep_nothing_is_read_and_the_search_ranks_in_sql(
    journal, kept_open_vectors, monkeypatch
):
    owner, _ = journal
    expected = search(owner, "orchard", respect_consent=True)
    open_vectors.forget(owner.pk)
    monkeypatch.setattr(open_vectors, "MAX_ROWS", 0)  # KEEPSAKE_SEARCH_OPEN_VECTORS_ROWS=0
    monkeypatch.setattr(open_vectors, "_read", lambda owner_id: pytest.fail("read with no rows to keep"))
    assert search(owner, "orchard", respect_consent=True) == expected
    assert kept_open_vectors == [(owner.pk, True), (owner.pk, False)]


def test_copies_are_kept_within_the_row_budget_and_for_a_bounded_time(kept_open_vectors, monkeypatch):
    first, _, _ = make_journal()
    second, _, _ = make_journal()
    open_rows = MemoryGate.objects.filter(owner=first, blocked_count=0, embedding__isnull=False).count()
    monkeypatch.setattr(open_vectors, "MAX_ROWS", open_rows + 1)
    found(first, "lantern")
    assert open_vectors.kept(first.pk) is not None
    found(second, "lantern")
    assert open_vectors.kept(second.pk) is not None
    assert open_vectors.kept(first.pk) is None  # the older copy made room
    monkeypatch.setattr(open_vectors, "MAX_AGE_SECONDS", 0.0)
    assert open_vectors.kept(second.pk) is None


@pytest.mark.server_alone  # pg_snapshot_xmin is the server's: any older open transaction holds it back
def test_the_prune_deletes_only_rows_no_copy_can_need(journal):
    owner, _ = journal
    assert changes(owner)
    # A transaction still open, with an id: rows of transactions after it are not yet known ended.
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def long_transaction():
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_current_xact_id()")
                started.set()
                release.wait(30)
        finally:
            connection.close()
            finished.set()

    thread = threading.Thread(target=long_transaction)
    thread.start()
    try:
        assert started.wait(30)
        Person.objects.filter(owner=owner, display_name="Gran").update(consent_status=ConsentStatus.REVOKED)
        later = max(changes(owner))
        marked, deleted = open_vectors.prune(after_seconds=0)
        assert deleted == marked > 0  # the journal's own rows
        assert changes(owner) == [later]
        assert MemoryGateChange.objects.get(owner=owner).completed_at is None
    finally:
        release.set()
        thread.join(30)
    assert finished.is_set()
    assert open_vectors.prune(after_seconds=3600) == (1, 0)
    assert MemoryGateChange.objects.get(owner=owner).completed_at is not None
    assert gate_changes_prune() == 0  # the beat's delay: kept
    assert open_vectors.prune(after_seconds=0) == (0, 1)
    assert changes(owner) == []


def test_the_prune_runs_on_the_beat_and_outlives_every_copy():
    entry = settings.CELERY_BEAT_SCHEDULE["memories-gate-changes-prune"]
    assert entry["task"] == gate_changes_prune.name
    assert open_vectors.PRUNE_AFTER_SECONDS > open_vectors.MAX_AGE_SECONDS


def test_deleting_the_account_deletes_its_change_rows(journal):
    from portability.services import account_delete

    owner, _ = journal
    assert changes(owner)
    account_delete(user=owner, password="correct horse battery")
    assert not MemoryGateChange.objects.filter(owner_id=owner.pk).exists()


def test_when_hidden_memories_take_the_nearest_places_the_copy_hands_over_more(
    kept_open_vectors, monkeypatch
):
    """Without filters the copy hands over a few more than asked; when the lifecycle hides
    those (expired memories are open to the gate count but not to agents), it widens."""
    owner, _, _ = make_journal()
    query = unit_vector(7)
    open_ids = list(
        MemoryGate.objects.filter(owner=owner, blocked_count=0).values_list("memory_id", flat=True)
    )
    by_distance = sorted(
        Memory.objects.filter(pk__in=open_ids), key=lambda memory: -float(np.dot(memory.embedding, query))
    )
    hidden = [memory.pk for memory in by_distance[: 2 + search_settings.KEPT_SPARE_CANDIDATES]]
    Memory.objects.filter(pk__in=hidden).update(expires_at=timezone.now() - timedelta(days=1))
    widths = []
    nearest = open_vectors.OpenVectors.nearest

    def recorded(self, embedding, count):
        widths.append(count)
        return nearest(self, embedding, count)

    monkeypatch.setattr(open_vectors.OpenVectors, "nearest", recorded)

    def knn() -> list[uuid.UUID]:
        scope = retrieval.memory_scope(owner, respect_consent=True)
        return nearest_ids(scope, query, owner_id=owner.pk, limit=2, gated=True)

    monkeypatch.setattr(open_vectors, "ENABLED", False)
    expected = knn()
    monkeypatch.setattr(open_vectors, "ENABLED", True)
    assert knn() == expected
    assert len(expected) == 2 and not set(expected) & set(hidden)
    assert widths == [
        2 + search_settings.KEPT_SPARE_CANDIDATES,
        2 * search_settings.EXACT_CANDIDATES_OVERFETCH,
    ]
    assert kept_open_vectors == [(owner.pk, False), (owner.pk, True)]  # off, then from the copy


def test_the_copy_ranks_by_cosine_and_puts_a_zero_vector_last():
    rows = np.array([[1.0, 0.0], [0.0, 0.0], [0.6, 0.8], [-1.0, 0.0], [0.8, 0.6]], dtype=np.float32)
    lengths = np.linalg.norm(rows, axis=1, keepdims=True)
    matrix = np.divide(rows, lengths, out=np.full_like(rows, np.nan), where=lengths > 0)
    ids = [uuid.UUID(int=number) for number in range(len(rows))]
    copy = open_vectors.OpenVectors(
        owner_id=1,
        snapshot="1:1:",
        ids=np.array([list(memory_id.bytes) for memory_id in ids], dtype=np.uint8),
        matrix=matrix,
        read_at=0.0,
    )
    # Nearest to (1, 0.1) by cosine: (1, 0), (0.8, 0.6), (0.6, 0.8), then (-1, 0); the zero vector never.
    assert set(copy.nearest([10.0, 1.0], 1)) == {ids[0]}
    assert set(copy.nearest([10.0, 1.0], 3)) == {ids[0], ids[4], ids[2]}
    assert set(copy.nearest([10.0, 1.0], 4)) == {ids[0], ids[4], ids[2], ids[3]}
    assert set(copy.nearest([10.0, 1.0], 9)) == set(ids)
