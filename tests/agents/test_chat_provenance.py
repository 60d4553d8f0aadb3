"""The owner's agent chat keeps what each reply was built from; the owner reads their own chats in full.

SPEC §3: a stored reply keeps the ids of its sources, and a deleted source must not
make it look sourceless. The owner's own (non-circle) chats are the owner's to read
whole, so nothing there is withheld from them; earlier replies never go back into a
prompt (only the owner's own questions do).
"""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.urls import reverse

from agents.models import MemoryProposal, Message, MessageRole
from agents.proposals import memory_proposal_create
from agents.services import chat_turn
from memories.services import memory_delete
from people.models import ConsentStatus
from people.services import person_set_consent

pytestmark = pytest.mark.django_db


def test_a_reply_keeps_its_sources_in_prompt_order_after_one_is_deleted(alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="What happened in the park?")
    reply = turn.reply
    assert reply.source_ids == [memory.pk for memory in turn.memories]
    assert journal.tulips.pk in reply.source_ids
    tulips_id = journal.tulips.pk
    memory_delete(memory=journal.tulips)
    reply.refresh_from_db()
    assert tulips_id in reply.source_ids
    assert not reply.cited_memories.filter(pk=tulips_id).exists()


def test_the_owner_still_reads_their_own_chat_whole_after_consent_is_revoked(
    alice_client, alice, journal, offline
):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="tulips")
    assert "Carol planted red tulips" in turn.reply.content
    person_set_consent(person=journal.carol, status=ConsentStatus.REVOKED, actor=alice)
    page = alice_client.get(reverse("agent_conversation", args=[journal.caregiver.pk, turn.conversation.pk]))
    assert "Carol planted red tulips" in page.content.decode()
    assert "no longer shared with you" not in page.content.decode()


def test_earlier_replies_never_go_back_into_the_prompt(alice, journal, llm_stub):
    llm_stub.reply = "REPLY-WORDS from the tulips [1]"
    first = chat_turn(owner=alice, agent=journal.caregiver, text="tulips")
    chat_turn(owner=alice, agent=journal.caregiver, text="and the park?", conversation=first.conversation)
    last = "\n".join(message["content"] for message in llm_stub.requests[-1]["messages"])
    assert "REPLY-WORDS" not in last
    assert "tulips" in last  # the owner's own earlier question is theirs to repeat
    assert first.conversation.messages.filter(role=MessageRole.ASSISTANT).count() == 2


def test_an_insight_proposal_keeps_its_sources_ids(alice, journal):
    proposal = memory_proposal_create(
        owner=alice,
        agent=journal.caregiver,
        text="Gardens are good places to talk.",
        surface="mcp",
        sources=[journal.tulips, journal.walk],
    )
    made_from = [journal.tulips.pk, journal.walk.pk]
    assert proposal.source_ids == made_from
    memory_delete(memory=journal.walk)
    proposal.refresh_from_db()
    assert proposal.source_ids == made_from


def test_the_migration_fills_sources_from_citations_and_proposal_sources(alice, journal, offline):
    fill = importlib.import_module("agents.migrations.0008_derived_text_source_ids").FILL
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="What happened in the park?")
    proposal = memory_proposal_create(
        owner=alice, agent=journal.caregiver, text="Parks are calm.", surface="mcp", sources=[journal.walk]
    )
    Message.objects.update(source_ids=[])
    MemoryProposal.objects.update(source_ids=[])
    with connection.cursor() as cursor:
        cursor.execute(fill)
    turn.reply.refresh_from_db()
    proposal.refresh_from_db()
    assert turn.reply.source_ids == [memory.pk for memory in turn.memories] != []
    assert proposal.source_ids == [journal.walk.pk]
    assert Message.objects.get(pk=turn.question.pk).source_ids == []
