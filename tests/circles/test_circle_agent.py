"""The circle's agent: replies use only what every reader may see (slashAI), DMs per Ash.

The prompt is captured at the LLM boundary (a local HTTP stub) and compared with
what SPEC §4 allows each viewer set; the page tests check isolation and citations.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from circles.agent import circle_chat_turn, circle_conversation
from circles.models import CircleMembership, CircleMessage
from circles.services import membership_remove, memory_share
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentActor, ConsentStatus, Person
from people.services import person_create, person_set_consent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(alice, bob, family):
    """Alice's memories shared into Family: public, personal and sensitive about Bob, expired, Carol's."""
    about_bob = person_create(owner=alice, display_name="Bob")
    Person.objects.filter(pk=about_bob.pk).update(linked_user=bob)
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(
        person=about_bob,
        status=ConsentStatus.GRANTED,
        actor=bob,
        actor_kind=ConsentActor.SELF,
        audience=family.audience,
    )
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice, audience=family.audience)
    # Alice reads the shared conversation, so her own memories reach the circle's agent only
    # when her agents may read them too (no agent is the owner): Bob and Carol granted that.
    person_set_consent(
        person=about_bob, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF
    )
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    made = {}
    for key, body, sensitivity, people in [
        ("public", "lantern festival by the harbor", "public", []),
        ("personal", "lantern gift for Bob, personal", "personal", [about_bob]),
        ("sensitive", "lantern and Bob's hospital visit", "sensitive", [about_bob]),
        ("expired", "lantern market, long ago", "public", []),
        ("carol", "lantern painting with Carol", "public", [carol]),
    ]:
        memory = memory_create(
            owner=alice,
            body=body,
            sensitivity=sensitivity,
            participants=[ParticipantSpec(person=person) for person in people],
        )
        memory_share(memory=memory, circle=family, by=alice)
        made[key] = memory
    Memory.objects.filter(pk=made["expired"].pk).update(expires_at=timezone.now() - timedelta(days=1))
    made["carol_person"] = carol
    return made


def used(reply: CircleMessage) -> set:
    return {memory.pk for memory in reply.cited_memories.all()}


def ids(world, *keys) -> set:
    return {world[key].pk for key in keys}


def test_shared_reply_uses_only_what_every_member_may_see(alice, bob, family, world, llm_stub):
    conversation = circle_conversation(circle=family, user=bob, private=False)
    reply = circle_chat_turn(conversation=conversation, user=bob, text="Tell me about the lantern")
    # Alice owns all; Bob may see personal about him; sensitive never in a shared reply;
    # expired never to agents.
    assert used(reply) == ids(world, "public", "personal", "carol")
    prompt = "\n".join(llm_stub.prompts)
    assert "hospital" not in prompt and "long ago" not in prompt

    dave = UserFactory()
    CircleMembership.objects.create(circle=family, user=dave)
    reply = circle_chat_turn(conversation=conversation, user=bob, text="Tell me about the lantern")
    assert used(reply) == ids(world, "public", "carol")  # personal about Bob is not Dave's to read
    assert "gift for Bob" not in llm_stub.prompts[-1] + llm_stub.prompts[-2]

    membership_remove(circle=family, user_id=dave.pk, by=alice)
    reply = circle_chat_turn(conversation=conversation, user=alice, text="lantern")
    assert used(reply) == ids(world, "public", "personal", "carol")


def test_private_chat_is_that_member_alone(alice, bob, family, world, offline):
    mine = circle_conversation(circle=family, user=bob, private=True)
    reply = circle_chat_turn(conversation=mine, user=bob, text="what do you know about the lantern")
    # Sensitive memories only once the circle's owner cleared its agent for them.
    assert used(reply) == ids(world, "public", "personal", "carol")
    family.agent_may_read_sensitive = True
    family.save(update_fields=["agent_may_read_sensitive"])
    reply = circle_chat_turn(conversation=mine, user=bob, text="what do you know about the lantern")
    assert used(reply) == ids(world, "public", "personal", "sensitive", "carol")
    dave = UserFactory()
    CircleMembership.objects.create(circle=family, user=dave)
    daves = circle_conversation(circle=family, user=dave, private=True)
    assert used(circle_chat_turn(conversation=daves, user=dave, text="lantern")) == ids(
        world, "public", "carol"
    )
    with pytest.raises(PermissionDenied):
        circle_chat_turn(conversation=mine, user=dave, text="lantern")


def test_consent_revoked_between_two_turns_leaves_the_next_reply(alice, bob, family, world, offline):
    conversation = circle_conversation(circle=family, user=bob, private=False)
    assert world["carol"].pk in used(circle_chat_turn(conversation=conversation, user=bob, text="lantern"))
    person_set_consent(
        person=world["carol_person"], status=ConsentStatus.REVOKED, actor=alice, audience=family.audience
    )
    assert world["carol"].pk not in used(
        circle_chat_turn(conversation=conversation, user=bob, text="lantern")
    )


def test_a_former_member_cannot_talk_to_the_agent(alice, bob, family, world, offline):
    conversation = circle_conversation(circle=family, user=bob, private=False)
    membership_remove(circle=family, user_id=bob.pk, by=bob)
    with pytest.raises(PermissionDenied):
        circle_chat_turn(conversation=conversation, user=bob, text="lantern")


def test_chat_pages_are_for_members_only(client, alice, bob, family, mallory, world, offline):
    client.force_login(mallory)
    for name in ("circle_chat", "circle_chat_private"):
        assert (
            client.get(f"/circles/{family.pk}/chat/" + ("private/" if "private" in name else "")).status_code
            == 404
        )
    assert client.post(f"/circles/{family.pk}/chat/send/", {"message": "lantern"}).status_code == 404
    assert not CircleMessage.objects.exists()


def test_chat_page_plain_and_htmx_and_citations_link_only_what_the_reader_may_open(
    client, alice, bob, family, world, offline
):
    client.force_login(bob)
    response = client.post(f"/circles/{family.pk}/chat/send/", {"message": "lantern"})
    assert response.status_code == 302
    page = client.get(f"/circles/{family.pk}/chat/").content.decode()
    assert f"/circles/{family.pk}/memories/{world['public'].pk}/" in page
    assert "lantern painting with Carol" in page
    # Carol revokes: the old reply drew on her memory, so for Bob it is the placeholder —
    # neither its words nor any of its citations stay (SPEC §3: derived text is gated).
    person_set_consent(
        person=world["carol_person"], status=ConsentStatus.REVOKED, actor=alice, audience=family.audience
    )
    page = client.get(f"/circles/{family.pk}/chat/").content.decode()
    assert "This reply drew on a memory that is no longer shared with you." in page
    assert "lantern painting with Carol" not in page and "lantern festival" not in page
    assert f"/circles/{family.pk}/memories/{world['carol'].pk}/" not in page
    assert f"/circles/{family.pk}/memories/{world['public'].pk}/" not in page
    response = client.post(
        f"/circles/{family.pk}/chat/private/send/", {"message": "lantern"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and 'id="chat-panel"' in response.content.decode()
    assert client.post(f"/circles/{family.pk}/chat/send/", {"message": "  "}).status_code == 400


def test_private_conversation_is_not_shown_to_others(client, alice, bob, family, world, offline):
    client.force_login(bob)
    client.post(f"/circles/{family.pk}/chat/private/send/", {"message": "my secret lantern question"})
    client.force_login(alice)
    assert "my secret lantern question" not in client.get(f"/circles/{family.pk}/chat/").content.decode()
    assert (
        "my secret lantern question" not in client.get(f"/circles/{family.pk}/chat/private/").content.decode()
    )


def test_only_the_owner_sets_up_the_circle_agent(client, alice, bob, family):
    client.force_login(bob)
    assert client.post(f"/circles/{family.pk}/chat/agent/", {"role": "tutor"}).status_code == 404
    client.force_login(alice)
    client.post(f"/circles/{family.pk}/chat/agent/", {"role": "tutor", "instructions": "Help the kids."})
    family.refresh_from_db()
    assert (family.agent_role, family.agent_instructions) == ("tutor", "Help the kids.")
