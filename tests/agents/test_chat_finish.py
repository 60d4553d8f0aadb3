"""Chat rendering and housekeeping: safe Markdown, numbered citations, retry, deleting a conversation."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from agents.citations import citations_attach
from agents.markdown import Citation, reply_html
from agents.models import AccessLog, Conversation, Message
from agents.services import chat_retry, chat_turn, conversation_delete
from memories.services import memory_create

pytestmark = pytest.mark.django_db


# --- the renderer ----------------------------------------------------------------


def test_reply_html_renders_markdown_and_escapes_raw_html():
    html = reply_html("**Bold** and *soft*\n\n- one\n- two\n\n<script>alert(1)</script> <b onclick=x>hi</b>")
    assert "<strong>Bold</strong>" in html
    assert "<em>soft</em>" in html
    assert "<li>one</li>" in html
    assert "<script" not in html
    assert "onclick=x" not in html.replace("&lt;b onclick=x&gt;", "")
    assert "&lt;script&gt;" in html


def test_reply_html_never_renders_images_or_script_links():
    html = reply_html("![secret](https://evil.example/x.png?q=chess) [click](javascript:alert(1))")
    assert "<img" not in html
    assert 'href="javascript' not in html


def test_reply_html_links_known_citations_only():
    citations = {
        1: Citation(number=1, url="/memories/one/", title="Tulips"),
        2: Citation(number=2, url=None, title="No longer shown to you"),
    }
    html = reply_html("Carol planted them [1]; see also [2] and [7]. Code: `[1]`", citations)
    assert '<a class="citation" href="/memories/one/"' in html
    assert '<span class="citation citation-hidden" title="No longer shown to you">[2]</span>' in html
    assert "[7]" in html and "/memories/7" not in html  # not a citation of this reply
    assert "<code>[1]</code>" in html


def test_reply_html_splits_grouped_citations():
    citations = {n: Citation(number=n, url=f"/m/{n}/", title=str(n)) for n in (1, 3)}
    html = reply_html("Both [1, 3].", citations)
    assert 'href="/m/1/"' in html and 'href="/m/3/"' in html


def test_reply_html_heading_is_never_a_page_heading():
    html = reply_html("# Summary\n\ntext")
    assert "<h1" not in html and "<h3>Summary</h3>" in html


# --- citations keep the prompt's numbering ----------------------------------------


def test_citations_keep_the_order_the_prompt_numbered(alice, journal, llm_stub):
    extra = [memory_create(owner=alice, body=f"I walked in the park with tulips, day {n}.") for n in range(4)]
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="tulips park walk")
    prompt = llm_stub.requests[-1]["messages"][0]["content"]
    [message] = citations_attach([Message.objects.get(pk=turn.reply.pk)])
    assert len(turn.memories) >= 2
    assert message.citations == turn.memories
    # [n] in the prompt is the n-th memory handed over: the body of each appears after its number.
    for number, memory in enumerate(message.citations, start=1):
        after = prompt.split(f"[{number}] ", 1)[1]
        assert memory.body.strip() in after.split("\n\n", 1)[0]
    assert len(extra) == 4


# --- retry and delete -----------------------------------------------------------------


def test_retry_replaces_the_failed_pair_with_a_new_answer(alice, journal, llm_stub):
    llm_stub.status = 500
    failed = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    assert failed.reply.is_error
    llm_stub.status = 200
    llm_stub.reply = "Carol did [1]."
    turn, replaced = chat_retry(owner=alice, reply=failed.reply)
    assert set(replaced) == {failed.question.pk, failed.reply.pk}
    assert not turn.reply.is_error
    assert turn.conversation.pk == failed.conversation.pk
    assert list(turn.conversation.messages.values_list("content", flat=True)) == [
        "Who planted the tulips?",
        "Carol did [1].",
    ]


def test_only_a_failed_reply_can_be_retried(alice, mallory, journal, llm_stub):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    with pytest.raises(ValidationError):
        chat_retry(owner=alice, reply=turn.reply)
    llm_stub.status = 500
    failed = chat_turn(owner=alice, agent=journal.caregiver, text="Again?")
    with pytest.raises(ValidationError):
        chat_retry(owner=mallory, reply=failed.reply)


def test_deleting_a_conversation_keeps_the_access_log(alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    logged = AccessLog.objects.filter(owner=alice, agent=journal.caregiver).count()
    assert logged >= 1
    conversation_delete(owner=alice, conversation=turn.conversation)
    assert not Conversation.objects.filter(pk=turn.conversation.pk).exists()
    assert not Message.objects.filter(conversation_id=turn.conversation.pk).exists()
    assert AccessLog.objects.filter(owner=alice, agent=journal.caregiver).count() == logged


def test_someone_elses_conversation_cannot_be_deleted(alice, mallory, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    with pytest.raises(ValidationError):
        conversation_delete(owner=mallory, conversation=turn.conversation)
    assert Conversation.objects.filter(pk=turn.conversation.pk).exists()


# --- views --------------------------------------------------------------------------------


def test_delete_view_confirms_then_deletes(alice_client, alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    url = reverse("conversation_delete", args=[journal.caregiver.pk, turn.conversation.pk])
    page = alice_client.get(url)
    assert page.status_code == 200
    assert "Who has seen this" in page.content.decode()
    assert Conversation.objects.filter(pk=turn.conversation.pk).exists()
    response = alice_client.post(url)
    assert response.status_code == 302
    assert not Conversation.objects.filter(pk=turn.conversation.pk).exists()


def test_delete_view_404s_for_another_owner(mallory_client, alice, journal, offline):
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    url = reverse("conversation_delete", args=[journal.caregiver.pk, turn.conversation.pk])
    assert mallory_client.post(url).status_code == 404
    assert Conversation.objects.filter(pk=turn.conversation.pk).exists()


def test_chat_page_renders_markdown_with_linked_citations(alice_client, alice, journal, llm_stub):
    llm_stub.reply = "**Carol** planted them [1].\n\n<img src=x onerror=alert(1)>"
    turn = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    page = alice_client.get(reverse("agent_conversation", args=[journal.caregiver.pk, turn.conversation.pk]))
    html = page.content.decode()
    assert "<strong>Carol</strong>" in html
    first = turn.memories[0]
    assert f'<a class="citation" href="{reverse("memory_detail", args=[first.pk])}"' in html
    assert "<img src=x" not in html


@pytest.mark.parametrize("htmx", [False, True])
def test_retry_view_plain_and_htmx(alice_client, alice, journal, llm_stub, htmx):
    llm_stub.status = 500
    failed = chat_turn(owner=alice, agent=journal.caregiver, text="Who planted the tulips?")
    agent_id, conversation_id = journal.caregiver.pk, failed.conversation.pk
    page = alice_client.get(reverse("agent_conversation", args=[agent_id, conversation_id]))
    retry_url = reverse("agent_chat_retry", args=[agent_id, conversation_id, failed.reply.pk])
    assert retry_url in page.content.decode()
    llm_stub.status = 200
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = alice_client.post(retry_url, **headers)
    if htmx:
        html = response.content.decode()
        assert response.status_code == 200
        assert f'id="message-{failed.reply.pk}" hx-swap-oob="delete"' in html
        assert "A stub answer" in html
    else:
        assert response.status_code == 302
    assert not Message.objects.filter(pk=failed.reply.pk).exists()
    assert failed.conversation.messages.filter(is_error=False, role="assistant").count() == 1
