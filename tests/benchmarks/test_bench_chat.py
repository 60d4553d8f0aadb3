"""bench_chat sends chat turns through the API on a tiny world and prints their server time (a smoke test)."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from agents.models import Conversation

pytestmark = pytest.mark.django_db(transaction=True)


def test_bench_chat_times_turns_through_the_api_with_a_stub_model():
    out = StringIO()
    call_command("bench_chat", memories=400, gated=0.5, turns=12, stdout=out)
    text = out.getvalue()

    assert re.search(r"^bench_chat: 400 memories, 50% gated for agents; agent .+; 12 turns", text, re.M), text
    assert re.search(r"^  first turn in this process: [0-9.]+ ms \(the model's [0-9.]+\)$", text, re.M), text
    assert re.search(
        r"^  a turn, steady state: p50 [0-9.]+ / p95 [0-9.]+ / p99 [0-9.]+ ms; of which", text, re.M
    )
    assert re.search(r"^  goal: p95 <= 50 ms without the model: (met|NOT met)$", text, re.M)
    assert "load after:" in text
    # Thirteen turns (the first apart), ten to a conversation: two conversations.
    assert Conversation.objects.filter(agent__owner__username="bench_retrieval").count() == 2


def test_bench_chat_refuses_a_gated_fraction_of_one():
    with pytest.raises(CommandError, match="--gated"):
        call_command("bench_chat", memories=400, gated=1.0, turns=3, stdout=StringIO())
