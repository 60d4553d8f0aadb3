from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agents.models import AccessLog, Agent, Conversation, Message, MessageRole
from agents.services import PRIVACY_INSTRUCTION, chat_turn
from people.models import ConsentStatus
from people.services import person_set_consent

pytestmark = pytest.mark.django_db


def test_prompt_holds_instructions_privacy_rule_and_only_gated_memories(alice, journal, llm_stub):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="What happened in the park?")

    assert len(llm_stub.requests) == 1
    body = llm_stub.requests[0]
    assert body["model"] == "stub-model"
    assert llm_stub.headers[0] == {"path": "/v1/chat/completions", "authorization": "Bearer sk-test-key"}
    system, user = body["messages"]
    assert user == {"role": "user", "content": "What happened in the park?"}
    assert journal.caregiver.instructions in system["content"]
    assert PRIVACY_INSTRUCTION in system["content"]
    assert "Carol planted red tulips" in system["content"]
    assert "Carol" in system["content"]
    assert "I walked alone through the park" in system["content"]
    # Bob has not consented: his memory, and his name from it, never reach the model.
    assert "queen" not in system["content"]
    assert "Bob" not in system["content"]
    assert turn.reply.content == "A stub answer [1]."
    assert set(turn.reply.cited_memories.all()) == {journal.tulips, journal.walk}


def test_both_messages_are_saved_in_a_new_conversation_titled_by_the_question(alice, journal, llm_stub):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="What happened in the park?")

    conversation = Conversation.objects.get(owner=alice)
    assert turn.conversation == conversation
    assert conversation.title == "What happened in the park?"
    assert [(m.role, m.is_error) for m in conversation.messages.all()] == [
        (MessageRole.USER, False),
        (MessageRole.ASSISTANT, False),
    ]


def test_one_access_log_row_per_memory_handed_to_the_agent(alice, journal, llm_stub):
    chat_turn(owner=alice, agent=journal.caregiver, text="park", surface="api")

    rows = AccessLog.objects.filter(owner=alice)
    assert sorted(str(row.memory_id) for row in rows) == sorted(
        [str(journal.tulips.pk), str(journal.walk.pk)]
    )
    assert {(row.surface, row.agent_id, row.agent_name) for row in rows} == {
        ("api", journal.caregiver.pk, "Caregiver")
    }
    assert not AccessLog.objects.filter(memory=journal.chess).exists()


def test_revoking_consent_removes_the_memory_from_the_very_next_turn(alice, journal, llm_stub):
    first = chat_turn(owner=alice, agent=journal.caregiver, text="tulips")
    assert list(first.reply.cited_memories.all()) == [journal.tulips]

    person_set_consent(person=journal.carol, status=ConsentStatus.REVOKED, actor=alice)
    second = chat_turn(owner=alice, agent=journal.caregiver, text="tulips", conversation=first.conversation)

    assert list(second.reply.cited_memories.all()) == []
    assert "tulips in the garden" not in llm_stub.requests[-1]["messages"][0]["content"]


def test_later_prompts_repeat_earlier_questions_but_never_earlier_replies(alice, journal, llm_stub):
    llm_stub.reply = "Carol planted red tulips in the garden by the park."
    first = chat_turn(owner=alice, agent=journal.caregiver, text="tulips")
    person_set_consent(person=journal.carol, status=ConsentStatus.REVOKED, actor=alice)

    chat_turn(owner=alice, agent=journal.caregiver, text="anything new?", conversation=first.conversation)

    prompt = "\n".join(message["content"] for message in llm_stub.requests[-1]["messages"])
    assert "- tulips" in prompt
    assert "Carol planted red tulips" not in prompt


def test_timeout_saves_the_question_and_a_clear_error_reply(alice, journal, llm_stub, settings):
    settings.LLM_TIMEOUT = 0.5
    llm_stub.delay = 2.0

    turn = chat_turn(owner=alice, agent=journal.caregiver, text="park")

    assert turn.reply.is_error
    assert "did not answer within 0.5 seconds" in turn.reply.content
    assert "Your message is saved" in turn.reply.content
    assert list(turn.reply.cited_memories.all()) == []
    saved = list(Message.objects.filter(conversation=turn.conversation).values_list("role", "content"))
    assert saved[0] == (MessageRole.USER, "park")
    assert saved[1][0] == MessageRole.ASSISTANT


def test_server_error_saves_the_question_and_a_clear_error_reply(alice, journal, llm_stub):
    llm_stub.status = 500

    turn = chat_turn(owner=alice, agent=journal.caregiver, text="park")

    assert turn.reply.is_error
    assert "answered with an error (HTTP 500)" in turn.reply.content
    assert Message.objects.filter(conversation=turn.conversation).count() == 2


def test_unreachable_server_is_an_error_reply_not_an_exception(alice, journal, settings):
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens
    settings.LLM_TIMEOUT = 2.0

    turn = chat_turn(owner=alice, agent=journal.caregiver, text="park")

    assert turn.reply.is_error
    assert "Could not reach the language model at http://127.0.0.1:9/v1" in turn.reply.content


def test_offline_responder_answers_with_which_memories_when_and_who(alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="What happened in the park?")

    content = turn.reply.content
    assert "not a language model" in content
    assert "Carol planted red tulips" in content
    assert "with Carol" in content
    assert journal.tulips.occurred_at.strftime("%B %Y") in content
    assert "queen" not in content
    assert set(turn.reply.cited_memories.all()) == {journal.tulips, journal.walk}
    assert AccessLog.objects.filter(owner=alice, surface="chat").count() == 2


def test_offline_responder_says_when_nothing_matches(alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="submarine")

    assert "found no memories this agent may use" in turn.reply.content
    assert not AccessLog.objects.exists()


def test_question_naming_a_non_consenting_person_gets_a_notice_without_quoting(alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="What does bobby like about chess?")

    assert turn.withheld_people == [journal.bob]
    assert list(turn.reply.withheld_people.all()) == [journal.bob]
    assert "Memories involving Bob are not available to agents because Bob has not consented" in (
        turn.reply.content
    )
    assert "queen" not in turn.reply.content


def test_the_notice_is_not_sent_to_the_model(alice, journal, llm_stub):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Tell me about Bob")

    assert "not consented" in turn.reply.content
    assert "not consented" not in "\n".join(llm_stub.prompts)


def test_names_match_whole_words_only_and_consenting_people_are_not_withheld(alice, journal, offline):
    assert chat_turn(owner=alice, agent=journal.caregiver, text="bobsleigh and Carol").withheld_people == []


def test_bad_messages_are_refused_and_nothing_is_saved(alice, journal, offline):
    for text in ["", "   ", "x" * 4001]:
        with pytest.raises(ValidationError):
            chat_turn(owner=alice, agent=journal.caregiver, text=text)
    assert not Message.objects.exists()
    assert not Conversation.objects.exists()


def test_another_owners_agent_or_conversation_is_refused(alice, mallory, journal, offline):
    mallory_agent = Agent.objects.get(owner=mallory, name="Caregiver")
    with pytest.raises(ValidationError):
        chat_turn(owner=alice, agent=mallory_agent, text="park")
    other = chat_turn(owner=alice, agent=journal.caregiver, text="park").conversation
    tutor = Agent.objects.get(owner=alice, name="Tutor")
    with pytest.raises(ValidationError):
        chat_turn(owner=alice, agent=tutor, text="park", conversation=other)
