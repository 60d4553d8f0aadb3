from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import AccessLog, Agent, ConsentRequest, Conversation, Message
from agents.services import chat_turn, consent_request_create
from people.models import ConsentStatus

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


# --- agents page -------------------------------------------------------------------


def test_agents_page_lists_the_four_builtins_and_the_llm_status(alice_client, offline):
    response = alice_client.get(reverse("agent_list"))

    assert response.status_code == 200
    names = [agent.name for agent in response.context["agents"]]
    assert sorted(names) == ["Brainstorm", "Caregiver", "Reviewer", "Tutor"]
    assert "offline responder" in response.content.decode()


def test_anonymous_visitors_are_sent_to_log_in(client):
    response = client.get(reverse("agent_list"))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_creating_a_custom_agent_opens_its_chat(alice_client, alice):
    response = alice_client.post(
        reverse("agent_create"), {"name": "Gardener", "instructions": "Help me plan the garden."}
    )

    agent = Agent.objects.get(owner=alice, name="Gardener")
    assert response.status_code == 302
    assert response["Location"] == reverse("agent_chat", args=[agent.pk])
    assert (agent.role, agent.is_builtin) == ("custom", False)


def test_a_duplicate_or_empty_agent_is_refused_in_the_form(alice_client, alice):
    duplicate = alice_client.post(reverse("agent_create"), {"name": "caregiver", "instructions": "x"})
    empty = alice_client.post(reverse("agent_create"), {"name": "  ", "instructions": ""})

    assert duplicate.status_code == 200
    assert "You already have an agent called Caregiver." in duplicate.content.decode()
    assert empty.status_code == 200
    assert "Give the agent a name." in empty.content.decode()
    assert Agent.objects.filter(owner=alice).count() == 4


def test_custom_agents_can_be_edited_and_deleted(alice_client, alice):
    agent = Agent.objects.create(owner=alice, name="Gardener", instructions="Plan the garden.")

    assert alice_client.get(reverse("agent_edit", args=[agent.pk])).status_code == 200
    response = alice_client.post(
        reverse("agent_edit", args=[agent.pk]), {"name": "Head gardener", "instructions": "Plan beds."}
    )
    assert response.status_code == 302
    agent.refresh_from_db()
    assert (agent.name, agent.instructions) == ("Head gardener", "Plan beds.")

    assert alice_client.get(reverse("agent_delete", args=[agent.pk])).status_code == 200
    assert alice_client.post(reverse("agent_delete", args=[agent.pk])).status_code == 302
    assert not Agent.objects.filter(pk=agent.pk).exists()


def test_builtin_agents_cannot_be_edited_or_deleted(alice_client, alice):
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")

    edit = alice_client.post(reverse("agent_edit", args=[caregiver.pk]), {"name": "X", "instructions": "y"})
    delete = alice_client.post(reverse("agent_delete", args=[caregiver.pk]))

    assert edit.status_code == delete.status_code == 302
    caregiver.refresh_from_db()
    assert caregiver.name == "Caregiver"


def test_another_owners_agent_is_not_found_on_every_page(mallory_client, alice):
    agent = Agent.objects.get(owner=alice, name="Caregiver")
    for name in ["agent_chat", "agent_edit", "agent_delete"]:
        assert mallory_client.get(reverse(name, args=[agent.pk])).status_code == 404
    send = mallory_client.post(reverse("agent_chat_send", args=[agent.pk]), {"message": "hi"})
    assert send.status_code == 404
    assert not Message.objects.exists()


# --- chat -----------------------------------------------------------------------------


def test_chat_page_starts_a_new_conversation(alice_client, journal):
    response = alice_client.get(reverse("agent_chat", args=[journal.caregiver.pk]))

    assert response.status_code == 200
    assert response.context["conversation"] is None
    # static/js/chat.js shows the question and a typing line for forms marked data-chat-form.
    assert "data-chat-form" in response.content.decode()


def test_plain_post_saves_the_turn_and_redirects_to_the_conversation(alice_client, alice, journal, offline):
    response = alice_client.post(
        reverse("agent_chat_send", args=[journal.caregiver.pk]), {"message": "tulips"}
    )

    conversation = Conversation.objects.get(owner=alice)
    reply = conversation.messages.get(role="assistant")
    assert response.status_code == 302
    assert response["Location"] == (
        reverse("agent_conversation", args=[journal.caregiver.pk, conversation.pk]) + f"#message-{reply.pk}"
    )
    page = alice_client.get(reverse("agent_conversation", args=[journal.caregiver.pk, conversation.pk]))
    html = page.content.decode()
    assert "Carol planted red tulips" in html
    assert reverse("memory_detail", args=[journal.tulips.pk]) in html


def test_htmx_post_returns_both_messages_with_cited_memory_links(alice_client, alice, journal, offline):
    response = alice_client.post(
        reverse("agent_chat_send", args=[journal.caregiver.pk]), {"message": "tulips"}, **HX
    )

    html = response.content.decode()
    conversation = Conversation.objects.get(owner=alice)
    assert response.status_code == 200
    assert html.count('class="chat-message') == 2
    assert f'href="{reverse("memory_detail", args=[journal.tulips.pk])}"' in html
    # A new conversation: the hidden field and the list update out of band, the URL follows.
    assert f'value="{conversation.pk}" hx-swap-oob="true"' in html
    assert 'id="conversation-list" class="conversation-list" hx-swap-oob="true"' in html
    assert response["HX-Push-Url"] == reverse(
        "agent_conversation", args=[journal.caregiver.pk, conversation.pk]
    )


def test_htmx_post_into_an_existing_conversation_appends_without_oob(alice_client, alice, journal, offline):
    conversation = chat_turn(owner=alice, agent=journal.caregiver, text="tulips").conversation

    response = alice_client.post(
        reverse("agent_chat_send", args=[journal.caregiver.pk]),
        {"message": "park", "conversation": str(conversation.pk)},
        **HX,
    )

    assert response.status_code == 200
    assert "hx-swap-oob" not in response.content.decode()
    assert "HX-Push-Url" not in response
    assert conversation.messages.count() == 4


def test_empty_message_is_refused_in_place_plain_and_htmx(alice_client, journal, offline):
    url = reverse("agent_chat_send", args=[journal.caregiver.pk])

    plain = alice_client.post(url, {"message": "   "})
    htmx = alice_client.post(url, {"message": ""}, **HX)

    assert plain.status_code == 200
    assert "Write a message first." in plain.content.decode()
    assert htmx.status_code == 200
    assert htmx["HX-Retarget"] == "#chat-form"
    assert htmx["HX-Reswap"] == "outerHTML"
    assert "Write a message first." in htmx.content.decode()
    assert not Message.objects.exists()


def test_llm_failure_shows_a_clear_message_in_the_chat(alice_client, alice, journal, llm_stub):
    llm_stub.status = 500

    response = alice_client.post(
        reverse("agent_chat_send", args=[journal.caregiver.pk]), {"message": "tulips"}, **HX
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert "answered with an error (HTTP 500)" in html
    assert "chat-error" in html
    assert Message.objects.filter(conversation__owner=alice).count() == 2


def test_another_owners_conversation_is_not_found(alice, mallory, mallory_client, journal, offline):
    conversation = chat_turn(owner=alice, agent=journal.caregiver, text="tulips").conversation
    mallory_agent = Agent.objects.get(owner=mallory, name="Caregiver")

    page = mallory_client.get(reverse("agent_conversation", args=[mallory_agent.pk, conversation.pk]))
    send = mallory_client.post(
        reverse("agent_chat_send", args=[mallory_agent.pk]),
        {"message": "hi", "conversation": str(conversation.pk)},
    )

    assert page.status_code == 404
    assert send.status_code == 404
    assert conversation.messages.count() == 2


def test_a_conversation_is_not_found_under_another_of_the_owners_agents(
    alice_client, alice, journal, offline
):
    conversation = chat_turn(owner=alice, agent=journal.caregiver, text="tulips").conversation
    tutor = Agent.objects.get(owner=alice, name="Tutor")

    assert (
        alice_client.get(reverse("agent_conversation", args=[tutor.pk, conversation.pk])).status_code == 404
    )


# --- consent requests -------------------------------------------------------------------


def test_reply_about_a_non_consenting_person_offers_a_consent_request(alice_client, journal, offline):
    response = alice_client.post(
        reverse("agent_chat_send", args=[journal.caregiver.pk]), {"message": "What about Bob?"}, **HX
    )

    html = response.content.decode()
    assert "Memories involving Bob are not available to agents because Bob has not consented" in html
    assert "Note a consent request for Bob" in html
    assert "nothing is sent to Bob" in html
    assert "queen" not in html


def test_request_consent_button_creates_one_pending_request_plain_and_htmx(
    alice_client, alice, journal, offline
):
    conversation = chat_turn(owner=alice, agent=journal.caregiver, text="Bob?").conversation
    data = {"person": journal.bob.pk, "agent": journal.caregiver.pk, "conversation": conversation.pk}

    htmx = alice_client.post(reverse("consent_request_create"), data, **HX)
    plain = alice_client.post(reverse("consent_request_create"), data)

    assert htmx.status_code == 200
    assert "recorded for you — nothing was sent to Bob" in htmx.content.decode()
    assert plain.status_code == 302
    request = ConsentRequest.objects.get()
    assert (request.person, request.agent, request.conversation, request.status) == (
        journal.bob,
        journal.caregiver,
        conversation,
        "pending",
    )
    journal.bob.refresh_from_db()
    assert journal.bob.consent_status == ConsentStatus.PENDING
    # Back in the chat the button now says the request is waiting.
    page = alice_client.get(reverse("agent_conversation", args=[journal.caregiver.pk, conversation.pk]))
    assert "Note a consent request for Bob" not in page.content.decode()


def test_the_pending_request_shows_on_the_persons_page_and_approving_grants_consent(
    alice_client, alice, journal, offline
):
    request = consent_request_create(owner=alice, person=journal.bob, agent=journal.caregiver)

    page = alice_client.get(reverse("person_detail", args=[journal.bob.pk]))
    html = page.content.decode()
    assert "Consent requests" in html
    assert "Caregiver was asked about Bob" in html

    response = alice_client.post(reverse("consent_request_approve", args=[request.pk]))

    assert response.status_code == 302
    journal.bob.refresh_from_db()
    request.refresh_from_db()
    assert journal.bob.consent_status == ConsentStatus.GRANTED
    assert request.status == "approved" and request.resolved_at is not None
    event = journal.bob.consent_events.get()
    assert (event.actor, event.surface) == (alice, "ui")
    assert (
        "Consent requests"
        not in alice_client.get(reverse("person_detail", args=[journal.bob.pk])).content.decode()
    )


def test_dismissing_a_request_leaves_consent_unchanged(alice_client, alice, journal):
    request = consent_request_create(owner=alice, person=journal.bob, agent=journal.caregiver)

    alice_client.post(reverse("consent_request_dismiss", args=[request.pk]))

    request.refresh_from_db()
    journal.bob.refresh_from_db()
    assert request.status == "dismissed"
    assert journal.bob.consent_status == ConsentStatus.PENDING
    assert not journal.bob.consent_events.exists()


def test_another_owner_cannot_request_approve_or_dismiss(alice, mallory_client, journal):
    request = consent_request_create(owner=alice, person=journal.bob, agent=journal.caregiver)

    assert mallory_client.post(reverse("consent_request_approve", args=[request.pk])).status_code == 404
    assert mallory_client.post(reverse("consent_request_dismiss", args=[request.pk])).status_code == 404
    created = mallory_client.post(
        reverse("consent_request_create"), {"person": journal.bob.pk, "agent": journal.caregiver.pk}
    )
    assert created.status_code == 404
    journal.bob.refresh_from_db()
    assert journal.bob.consent_status == ConsentStatus.PENDING
    assert ConsentRequest.objects.get().status == "pending"


# --- who has seen this ------------------------------------------------------------------


def test_memory_page_shows_which_agent_saw_it_when_and_through_which_surface(
    alice_client, alice, journal, offline
):
    chat_turn(owner=alice, agent=journal.caregiver, text="tulips")
    assert AccessLog.objects.filter(memory=journal.tulips).count() == 1

    html = alice_client.get(reverse("memory_detail", args=[journal.tulips.pk])).content.decode()

    assert "Who has seen this" in html
    section = html[html.index('id="access-log"') :]
    assert "Caregiver" in section
    assert "Chat" in section


def test_memory_page_says_when_no_agent_has_seen_it(alice_client, journal):
    html = alice_client.get(reverse("memory_detail", args=[journal.chess.pk])).content.decode()

    assert "No agent has been given this memory yet." in html
