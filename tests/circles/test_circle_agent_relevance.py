"""The circle's agent, like the owner's, is handed only what a question needs: nothing for nonsense.

Uses the Family circle and Alice's shared memories of tests/circles/test_circle_agent.py,
embedded with the real model so meaning and words both count.
"""

from __future__ import annotations

import pytest

from agents.models import AccessLog
from circles.agent import circle_chat_turn, circle_conversation
from memories.services import memory_embed_batch
from tests.circles.test_circle_agent import used, world  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def embedded(world):  # noqa: F811
    memory_ids = [world[key].pk for key in ("public", "personal", "sensitive", "expired", "carol")]
    assert len(memory_embed_batch(memory_ids=memory_ids)) == len(memory_ids)
    return world


def test_nonsense_question_hands_the_circle_agent_no_memories(alice, bob, family, embedded, llm_stub):
    conversation = circle_conversation(circle=family, user=bob, private=False)
    reply = circle_chat_turn(conversation=conversation, user=bob, text="xqzv blorptang frumious")

    assert used(reply) == set()
    assert "(No memories matched this question.)" in llm_stub.prompts[0]
    assert "lantern" not in llm_stub.prompts[0]
    assert not AccessLog.objects.exists()


def test_circle_question_is_still_gated_first(alice, bob, family, embedded, llm_stub):
    conversation = circle_conversation(circle=family, user=bob, private=False)
    reply = circle_chat_turn(conversation=conversation, user=bob, text="What happened at the hospital?")

    # The hospital memory is sensitive: never in a shared reply, however relevant.
    assert embedded["sensitive"].pk not in used(reply)
    assert "hospital visit" not in llm_stub.prompts[0]
