"""An agent is handed only the memories a question needs, and nothing when nothing matches.

Alice's journal (tests/agents/conftest.py) is embedded with the real model here, so
both sides of the search (meaning and words) are in play. The prompt is captured
at the LLM boundary (the local HTTP stub).
"""

from __future__ import annotations

import pytest

from agents.models import AccessLog
from agents.services import chat_turn
from memories.services import memory_embed_batch

pytestmark = pytest.mark.django_db

NONSENSE = "xqzv blorptang frumious"
JOURNAL_TEXTS = ("Bob taught me chess", "Carol planted red tulips", "I walked alone through the park")


@pytest.fixture
def embedded(journal):
    stored = memory_embed_batch(memory_ids=[journal.chess.pk, journal.tulips.pk, journal.walk.pk])
    assert len(stored) == 3
    return journal


def _system_prompt(llm_stub) -> str:
    assert len(llm_stub.requests) == 1
    system, _ = llm_stub.requests[0]["messages"]
    return system["content"]


def test_nonsense_question_hands_the_agent_no_memories(alice, embedded, llm_stub):
    turn = chat_turn(owner=alice, agent=embedded.caregiver, text=NONSENSE)

    system = _system_prompt(llm_stub)
    assert "(No memories matched this question.)" in system
    for text in JOURNAL_TEXTS:
        assert text not in system
    assert turn.memories == []
    assert not turn.reply.cited_memories.exists()
    # "Who has seen this" stays empty: nothing was handed over.
    assert not AccessLog.objects.filter(owner=alice).exists()


def test_a_question_hands_over_only_the_memory_it_needs(alice, embedded, llm_stub):
    turn = chat_turn(owner=alice, agent=embedded.caregiver, text="Who planted the tulips?")

    system = _system_prompt(llm_stub)
    assert "Carol planted red tulips" in system
    # The walk is visible to agents too, but has nothing to do with tulips.
    assert "I walked alone through the park" not in system
    assert turn.memories == [embedded.tulips]
    assert list(AccessLog.objects.filter(owner=alice).values_list("memory_id", flat=True)) == [
        embedded.tulips.pk
    ]


def test_offline_responder_says_it_found_nothing_for_a_nonsense_question(alice, embedded, offline):
    turn = chat_turn(owner=alice, agent=embedded.caregiver, text=NONSENSE)

    content = turn.reply.content
    assert "not a language model" in content
    assert "found no memories this agent may use that match your question" in content
    for text in JOURNAL_TEXTS:
        assert text not in content
    assert not turn.reply.cited_memories.exists()
    assert not AccessLog.objects.exists()


def test_offline_responder_answers_from_the_relevant_memories_only(alice, embedded, offline):
    turn = chat_turn(owner=alice, agent=embedded.caregiver, text="Who planted the tulips?")

    content = turn.reply.content
    assert "I found 1 memory that matches your question" in content
    assert "Carol planted red tulips" in content
    assert "I walked alone" not in content
    assert list(turn.reply.cited_memories.all()) == [embedded.tulips]


def test_the_cut_off_never_hands_over_a_memory_the_gate_withheld(alice, embedded, llm_stub):
    # Bob has not consented: the chess memory is the closest match there is, and still absent.
    turn = chat_turn(owner=alice, agent=embedded.caregiver, text="Who taught me chess in the park?")

    system = _system_prompt(llm_stub)
    assert "chess" not in system.split("Memories:", 1)[1]
    assert embedded.chess not in turn.memories
