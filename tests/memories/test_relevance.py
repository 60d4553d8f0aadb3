"""The relevance cut-off: search and agents can say "nothing matches".

Vectors in a plane as in test_retrieval.py: `toward(angle)` has cosine similarity
cos(angle) with the query `toward(0)`, so which side of a threshold a memory
falls on is plain from its angle.
"""

from __future__ import annotations

import math
import uuid

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st

from memories import embeddings
from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryParticipant
from memories.retrieval import (
    NO_CUTOFF,
    RelevanceCutoff,
    memory_search,
    memory_search_highlights,
    question_relevance,
    search_relevance,
)
from memories.search import fusion
from people.models import ConsentStatus, Person

pytestmark = pytest.mark.django_db


def toward(angle: float) -> list[float]:
    vector = [0.0] * EMBEDDING_DIMENSIONS
    vector[0], vector[1] = math.cos(angle), math.sin(angle)
    return vector


def at_similarity(similarity: float) -> list[float]:
    return toward(math.acos(similarity))


def memory(owner, body: str, similarity: float | None, **fields) -> Memory:
    return Memory.objects.create(
        owner=owner,
        body=body,
        embedding=None if similarity is None else at_similarity(similarity),
        embedding_model="" if similarity is None else "test-plane",
        **fields,
    )


def found(owner, query: str, **options) -> set:
    options.setdefault("query_embedding", toward(0))
    return {hit.memory.pk for hit in memory_search(owner, query, **options)}


@pytest.fixture
def thresholds(settings):
    settings.RELEVANCE_MIN_SIMILARITY = 0.4
    settings.RELEVANCE_QUESTION_MIN_TEXT_SIMILARITY = 0.25
    settings.RELEVANCE_QUESTION_MARGIN = 0.1


# --- the rule -------------------------------------------------------------------------


def test_settings_build_the_cutoffs(thresholds):
    assert search_relevance() == RelevanceCutoff(min_similarity=0.4)
    assert question_relevance() == RelevanceCutoff(min_similarity=0.4, min_text_similarity=0.25, margin=0.1)


def test_nonsense_finds_nothing_where_it_used_to_find_the_nearest_memories(alice, thresholds):
    for similarity in (0.3, 0.1, -0.2):
        memory(alice, f"an unrelated day {similarity}", similarity)

    assert found(alice, "xqzv") == set()
    assert found(alice, "xqzv", respect_consent=True) == set()
    # Without the cut-off the nearest memories come back, however far.
    assert len(found(alice, "xqzv", relevance=NO_CUTOFF)) == 3


def test_search_keeps_close_meaning_and_every_word_match(alice, thresholds):
    close = memory(alice, "a quiet evening", 0.5)
    far = memory(alice, "a loud morning", 0.2)
    words = memory(alice, "the lantern we lit", 0.05)  # the words match, the meaning does not
    waiting = memory(alice, "a lantern not embedded yet", None)

    assert found(alice, "lantern") == {close.pk, words.pk, waiting.pk}
    assert far.pk not in found(alice, "lantern")


def test_a_question_needs_meaning_behind_a_word_match_and_stays_near_the_best(alice, thresholds):
    best = memory(alice, "the lantern we lit", 0.7)
    near = memory(alice, "another lantern", 0.65)
    behind = memory(alice, "a lantern far behind the best", 0.5)  # words match, > margin below the best
    weak = memory(alice, "lantern shop receipt", 0.1)  # a word in common, nothing else
    waiting = memory(alice, "a lantern not embedded yet", None)

    kept = found(alice, "lantern", respect_consent=True, relevance=question_relevance())

    assert kept == {best.pk, near.pk, waiting.pk}
    assert not {behind.pk, weak.pk} & kept


def test_the_cutoff_applies_before_the_limit_so_relevant_memories_are_not_crowded_out(alice, thresholds):
    relevant = [memory(alice, f"lantern {index}", 0.9) for index in range(3)]

    assert found(alice, "lantern", limit=2) <= {item.pk for item in relevant}
    assert len(found(alice, "lantern", limit=2)) == 2


def test_the_cutoff_never_returns_what_the_gate_withheld(alice, thresholds):
    bob = Person.objects.create(owner=alice, display_name="Bob", consent_status=ConsentStatus.PENDING)
    hidden = memory(alice, "lantern night with Bob", 0.99)
    MemoryParticipant.objects.create(memory=hidden, person=bob)
    shown = memory(alice, "lantern night alone", 0.95)

    assert found(alice, "lantern", respect_consent=True, relevance=question_relevance()) == {shown.pk}
    assert found(alice, "lantern", respect_consent=True, relevance=NO_CUTOFF) == {shown.pk}


cutoffs = st.builds(
    RelevanceCutoff,
    min_similarity=st.floats(min_value=-1.0, max_value=1.0),
    min_text_similarity=st.floats(min_value=-1.0, max_value=1.0),
    margin=st.one_of(st.none(), st.floats(min_value=0.0, max_value=2.0)),
)


# A candidate comes from the vector side (so it has a similarity) or from the words (or both).
candidate = st.one_of(
    st.tuples(st.floats(min_value=-1.0, max_value=1.0), st.booleans()), st.tuples(st.none(), st.just(True))
)


@given(
    candidates=st.lists(candidate, max_size=12),
    relevance=cutoffs,
    stricter=st.floats(min_value=0.0, max_value=0.5),
)
def test_the_rule_only_removes_and_a_stricter_cutoff_removes_more(candidates, relevance, stricter):
    ids = [uuid.uuid4() for _ in candidates]
    similarity = {i: s for i, (s, _) in zip(ids, candidates, strict=True) if s is not None}
    text_rank = {i: 0.1 for i, (_, words) in zip(ids, candidates, strict=True) if words}

    def keep(cutoff: RelevanceCutoff) -> set:
        return fusion._relevant(ids, similarity=similarity, text_rank=text_rank, relevance=cutoff)

    kept = keep(relevance)
    assert kept <= set(ids)
    assert keep(NO_CUTOFF) == set(ids)
    raised = RelevanceCutoff(
        min_similarity=relevance.min_similarity + stricter,
        min_text_similarity=relevance.min_text_similarity + stricter,
        margin=relevance.margin,
    )
    if relevance.margin is None:  # a margin is relative to the best kept, so it is not monotone
        assert keep(raised) <= kept
    for memory_id in kept:
        # Kept means: words matched (and meaning not too far, or unknown), or meaning close.
        meaning = similarity.get(memory_id)
        assert (memory_id in text_rank and (meaning is None or meaning >= relevance.min_text_similarity)) or (
            meaning is not None and meaning >= relevance.min_similarity
        )


# --- highlighting ----------------------------------------------------------------------


def test_highlights_mark_the_matching_words_and_escape_everything_else(alice):
    item = memory(alice, 'We lit the lanterns, 3 < 5 & <script>alert("x")</script>', None)
    other = memory(alice, "found by meaning only", 0.9)

    highlights = memory_search_highlights(alice, "lantern", [item.pk, other.pk])

    assert set(highlights) == {item.pk}
    html = str(highlights[item.pk])
    assert "<mark>lanterns</mark>" in html
    assert "<script" not in html  # PostgreSQL drops tags from a headline; the rest is escaped
    assert "3 &lt; 5 &amp;" in html
    assert "alert(&quot;x&quot;)" in html


def test_highlights_read_only_the_owners_own_memories(alice, mallory):
    theirs = memory(mallory, "mallory's lantern", None)

    assert memory_search_highlights(alice, "lantern", [theirs.pk]) == {}


def test_a_stray_marker_in_a_body_cannot_open_html(alice):
    item = memory(alice, "lantern \ue000<b>bold</b>\ue001 \ue001", None)

    html = str(memory_search_highlights(alice, "lantern", [item.pk])[item.pk])

    assert "<b>" not in html
    assert html.count("<mark>") == html.count("</mark>")


# --- the search page and the API --------------------------------------------------------


@pytest.fixture
def no_model(monkeypatch):
    def unavailable(text: str) -> list[float]:
        raise OSError("model not installed")

    monkeypatch.setattr(embeddings, "embed_text", unavailable)


@pytest.mark.parametrize("htmx", [False, True])
def test_search_page_says_nothing_matches_and_highlights_matches(alice, alice_client, no_model, htmx):
    memory(alice, "Carol planted <red> tulips by the gate", None)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}

    nothing = alice_client.get(reverse("memory_search") + "?q=xqzv", **headers).content.decode()
    tulips = alice_client.get(reverse("memory_search") + "?q=tulip", **headers).content.decode()

    assert "Nothing matches “xqzv”" in nothing
    assert "<mark>tulips</mark>" in tulips
    assert "&lt;red&gt;" in tulips
    assert "<red>" not in tulips


def test_api_search_hides_scores_unless_asked(alice, client, thresholds, monkeypatch):
    # The API embeds the query itself: "lantern" means the direction the memory points in.
    monkeypatch.setattr(embeddings, "embed_text", lambda text: toward(0 if "lantern" in text else math.pi))
    from accounts.models import TokenKind
    from accounts.services import access_token_create

    _, token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="scripts")
    item = memory(alice, "lantern festival", 0.9)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    plain = client.get("/api/v1/memories/search/", {"q": "lantern"}, **auth).json()
    scored = client.get("/api/v1/memories/search/", {"q": "lantern", "scores": "1"}, **auth).json()
    nothing = client.get("/api/v1/memories/search/", {"q": "xqzv"}, **auth).json()

    assert plain["results"] == [{"memory": plain["results"][0]["memory"]}]
    assert plain["results"][0]["memory"]["id"] == str(item.pk)
    result = scored["results"][0]
    assert result["score"] > 0
    assert result["similarity"] == pytest.approx(0.9, abs=1e-4)
    assert result["text_rank"] > 0
    assert nothing["results"] == []


def test_api_schema_documents_the_scores_parameter(client):
    schema = client.get("/api/schema/", {"format": "json"}).content.decode()

    assert "scores" in schema
    assert "Only with scores=1." in schema
