"""A one-word full-text search ranks exactly, however many memories hold the word (migration 0013).

ts_rank (no weights, no normalisation) ranks a memory for one word by how often
the word occurs in it; equal ranks go newest first, then by id. The full-text
side ranks at most TEXT_CANDIDATES_MAX of a query's matches; for one word it
finds the exact best instead: those holding the word at least twice (their own
index, themselves at most TEXT_CANDIDATES_MAX), then those holding it once,
newest first. The oracle here is the count
of the word in each body, in Python, and the reference ranking of every match
in SQL without a bound.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from memories import gate, retrieval
from memories.models import Memory, MemoryParticipant
from memories.retrieval import memory_search
from memories.search import fulltext, statements
from memories.search import settings as search_settings
from memories.services import memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db

NO_MATCH_VECTOR = [1.0] + [0.0] * 383  # nothing here is embedded: the vector side finds nothing


def _journal(owner):
    """Memories holding "lantern" 1-3 times, written oldest first (as a journal is), and some without."""
    now = timezone.now()
    bodies = []
    for n in range(18):
        times = (1, 1, 1, 2, 1, 3, 1, 1, 2)[n % 9]
        bodies.append(" ".join(["lantern"] * times) + f" by the quay, evening {n}")
    bodies += [f"the quay at night {n}" for n in range(5)]
    made = []
    for n, body in enumerate(bodies):
        memory = memory_create(owner=owner, body=body)
        # Oldest first, but two share a date: the id decides between them.
        occurred = now - timedelta(days=100 - n + (1 if n == 7 else 0))
        Memory.objects.filter(pk=memory.pk).update(occurred_at=occurred)
        made.append(Memory.objects.get(pk=memory.pk))
    return made


def _expected(memories, word: str = "lantern") -> list:
    """Plain Python: held more often first, then newest, then id."""
    holding = [m for m in memories if re.search(rf"\b{word}\b", m.body)]
    return [
        m.pk
        for m in sorted(
            holding, key=lambda m: (-m.body.split().count(word), -m.occurred_at.timestamp(), m.pk.int)
        )
    ]


def _reference(owner_id: int, word: str) -> list:
    """Every match ranked by ts_rank, no bound (what the benchmark's exact reference does)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM memories_memory, websearch_to_tsquery('english', %s) query "
            "WHERE owner_id = %s AND search_vector @@ query "
            "ORDER BY ts_rank(search_vector, query) DESC, occurred_at DESC, id",
            [word, owner_id],
        )
        return [row[0] for row in cursor.fetchall()]


def _text_side(owner, word: str, fetch: int, *, agents: bool = False) -> list:
    with statements._search_transaction():
        return [
            memory_id
            for memory_id, _, _ in fulltext._text_matches(
                gate._compiled_scope(owner.pk, respect_consent=agents),
                word,
                fetch,
                candidates=fulltext._owner_candidates_sql(owner.pk, agents=agents),
                one_word_exact=True,
            )
        ]


def test_the_words_held_at_least_twice():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT memories_repeated_lexemes(to_tsvector('english', %s)),"
            " memories_repeated_lexemes(to_tsvector('english', 'one lantern')),"
            " memories_repeated_lexemes(strip(to_tsvector('english', 'lantern lantern')))",
            ["The cat sat. Cats nap while a dog barks at the cat."],
        )
        assert cursor.fetchone() == ("'cat'", "", "")


@pytest.mark.parametrize("cap", [6, 3_000])
def test_one_word_ranks_exactly_whatever_the_cap(alice, monkeypatch, cap):
    memories = _journal(alice)
    # 6: as many as hold the word twice or more (those are ranked, up to the cap);
    # the other 12 are found newest first whatever the cap.
    monkeypatch.setattr(search_settings, "TEXT_CANDIDATES_MAX", cap)
    expected = _expected(memories)
    assert len(expected) == 18
    assert _reference(alice.pk, "lantern") == expected  # the oracle agrees with ts_rank

    assert _text_side(alice, "lantern", 20) == expected
    assert _text_side(alice, "lantern", 5) == expected[:5]
    assert _text_side(alice, "Lanterns", 7) == expected[:7]  # the same word, stemmed


def test_several_words_still_match_and_rank(alice, monkeypatch):
    memories = _journal(alice)
    monkeypatch.setattr(search_settings, "TEXT_CANDIDATES_MAX", 3_000)
    both = _text_side(alice, "lantern evening", 20)
    assert set(both) == {m.pk for m in memories if "lantern" in m.body}
    assert _text_side(alice, '"quay at night"', 20) == _reference(alice.pk, '"quay at night"')
    assert _text_side(alice, "lantern -evening", 20) == []


def test_the_owners_search_finds_the_newest_not_the_first_stored(alice, monkeypatch):
    # Written oldest first: before, a cap of 6 ranked the six oldest matches only.
    memories = _journal(alice)
    monkeypatch.setattr(search_settings, "TEXT_CANDIDATES_MAX", 6)
    hits = memory_search(
        alice, "lantern", query_embedding=NO_MATCH_VECTOR, relevance=retrieval.NO_CUTOFF, limit=6
    )
    assert [hit.memory.pk for hit in hits] == _expected(memories)[:6]
    assert all(hit.text_rank is not None for hit in hits)


def test_agents_rank_exactly_among_what_they_may_see(alice, monkeypatch):
    memories = _journal(alice)
    carol = person_create(owner=alice, display_name="Carol")  # pending: her memories are withheld
    withheld = _expected(memories)[::3]  # the best, and every third after it
    MemoryParticipant.objects.bulk_create(
        [MemoryParticipant(memory_id=memory_id, person=carol) for memory_id in withheld]
    )
    monkeypatch.setattr(search_settings, "TEXT_CANDIDATES_MAX", 6)
    visible = [memory_id for memory_id in _expected(memories) if memory_id not in withheld]

    assert _text_side(alice, "lantern", 20, agents=True) == visible
    hits = memory_search(
        alice, "lantern", respect_consent=True, query_embedding=NO_MATCH_VECTOR, relevance=retrieval.NO_CUTOFF
    )
    assert [hit.memory.pk for hit in hits] == visible[:10]

    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    assert _text_side(alice, "lantern", 20, agents=True) == _expected(memories)


def test_a_stale_agents_flag_is_skipped_not_shown(alice, monkeypatch):
    # The gate decides: a row the copy wrongly calls open is probed and refused, and
    # the next best takes its place.
    memories = _journal(alice)
    carol = person_create(owner=alice, display_name="Carol")
    best = _expected(memories)
    newest_once = [
        memory_id for memory_id in best if Memory.objects.get(pk=memory_id).body.count("lantern") == 1
    ][0]
    MemoryParticipant.objects.create(memory_id=newest_once, person=carol)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memorytext SET agents_open = true WHERE memory_id = %s", [newest_once]
        )
    monkeypatch.setattr(search_settings, "TEXT_CANDIDATES_MAX", 6)

    assert _text_side(alice, "lantern", 20, agents=True) == [m for m in best if m != newest_once]


def test_agents_skip_superseded_and_expired_matches_and_take_the_next(alice, monkeypatch):
    # Agents never see a superseded or expired memory; the memories holding the word
    # once are read newest first, and the ones the gate refuses make way for older ones.
    memories = _journal(alice)
    best = _expected(memories)
    once = [
        memory_id for memory_id in best if Memory.objects.get(pk=memory_id).body.split().count("lantern") == 1
    ]
    replacement = memory_create(owner=alice, body="a newer version, without the word")
    Memory.objects.filter(pk__in=once[:2]).update(superseded_by=replacement)
    Memory.objects.filter(pk=once[2]).update(expires_at=timezone.now() - timedelta(days=1))
    monkeypatch.setattr(search_settings, "TEXT_CANDIDATES_MAX", 6)

    assert _text_side(alice, "lantern", 8, agents=True) == [m for m in best if m not in once[:3]][:8]
    assert _text_side(alice, "lantern", 8) == best[:8]  # the owner sees them all


@pytest.mark.parametrize("agents", [False, True])
def test_a_small_owners_text_side_reads_their_own_rows_and_ranks_every_match(alice, agents):
    # At most EXACT_SEARCH_MAX_MEMORIES memories: fewer matches than TEXT_CANDIDATES_MAX,
    # so every match is ranked, read from the owner's own rows (OFFSET 0: no full-text
    # index, whose entries for a word list every owner's memories that hold it).
    from django.test.utils import CaptureQueriesContext

    assert search_settings.EXACT_SEARCH_MAX_MEMORIES <= search_settings.TEXT_CANDIDATES_MAX
    memories = _journal(alice)
    with CaptureQueriesContext(connection) as queries:
        hits = memory_search(
            alice,
            "lantern",
            respect_consent=agents,
            query_embedding=NO_MATCH_VECTOR,
            relevance=retrieval.NO_CUTOFF,
            limit=20,
        )
    assert [hit.memory.pk for hit in hits] == _expected(memories)
    text = [query["sql"] for query in queries.captured_queries if "websearch_to_tsquery" in query["sql"]]
    assert len(text) == 1
    assert "OFFSET 0" in text[0] and "memories_repeated_lexemes" not in text[0]
