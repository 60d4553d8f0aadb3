"""A circle chat reply is gated like the memories it was built from, for each reader, on every read.

SPEC §3 "What is made from a memory is gated like the memory": a stored reply keeps the
ids of its sources, and the page and its htmx fragment show it to a reader only if
every source is visible to that reader now; otherwise a placeholder that names
nothing. Alice owns Family, Bob is in it (and is a person in her journal, linked to
him), Carol is a person in her journal who consented; Dave joins later.
"""

from __future__ import annotations

import importlib
import re
import uuid

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection, transaction

from agents.citations import citations_save
from circles.agent import circle_chat_turn, circle_conversation
from circles.models import CircleConversation, CircleMembership, CircleMessage
from circles.replies import REPLY_WITHHELD, circle_messages_for_reader
from circles.services import membership_remove, memory_share, memory_unshare
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create, memory_delete
from people.models import AGENTS_AUDIENCE, ConsentActor, ConsentStatus, Person
from people.services import person_create, person_set_consent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PLACEHOLDER = "This reply drew on a memory that is no longer shared with you."


class Family:
    def __init__(self, alice, bob, family) -> None:
        self.alice, self.bob, self.circle = alice, bob, family
        self.bob_person = person_create(owner=alice, display_name="Bob")
        Person.objects.filter(pk=self.bob_person.pk).update(linked_user=bob)
        self.carol = person_create(owner=alice, display_name="Carol")
        # Granted for the circle and for Alice's agents: whatever the gate asks of a memory
        # the circle's agent uses, these pass it.
        for audience in (family.audience, AGENTS_AUDIENCE):
            person_set_consent(
                person=self.bob_person,
                status=ConsentStatus.GRANTED,
                actor=bob,
                actor_kind=ConsentActor.SELF,
                audience=audience,
            )
            person_set_consent(
                person=self.carol, status=ConsentStatus.GRANTED, actor=alice, audience=audience
            )
        self.painting = self.memory(alice, "lantern painting with Carol", "public", [self.carol])
        self.harbor = self.memory(alice, "lantern festival by the harbor", "public", [])
        self.gift = self.memory(alice, "lantern gift for Bob", "personal", [self.bob_person])
        self.hospital = self.memory(alice, "Bob's hospital visit", "sensitive", [self.bob_person])
        self.bobs = self.memory(bob, "Bob's own lantern walk", "public", [])

    def memory(self, owner, body: str, sensitivity: str, people: list[Person]) -> Memory:
        memory = memory_create(
            owner=owner,
            body=body,
            sensitivity=sensitivity,
            participants=[ParticipantSpec(person=person) for person in people],
        )
        memory_share(memory=memory, circle=self.circle, by=owner)
        return memory

    def shared(self) -> CircleConversation:
        return circle_conversation(circle=self.circle, user=self.bob, private=False)

    def private(self, user) -> CircleConversation:
        return circle_conversation(circle=self.circle, user=user, private=True)


@pytest.fixture
def world(alice, bob, family) -> Family:
    return Family(alice, bob, family)


def stored_reply(conversation: CircleConversation, text: str, memories: list[Memory]) -> CircleMessage:
    """A reply as the circle's turn stores it: the message and its sources in one transaction."""
    with transaction.atomic():
        reply = CircleMessage.objects.create(
            conversation=conversation, role=CircleMessage.Role.ASSISTANT, content=text
        )
        citations_save(message=reply, memories=memories)
    return reply


def page(client, user, world: Family, *, private: bool = False) -> str:
    client.force_login(user)
    response = client.get(f"/circles/{world.circle.pk}/chat/" + ("private/" if private else ""))
    assert response.status_code == 200
    return response.content.decode()


def fragment(client, user, world: Family, *, private: bool = False) -> str:
    """The htmx fragment the chat swaps in after a message (a question with nothing to find)."""
    client.force_login(user)
    response = client.post(
        f"/circles/{world.circle.pk}/chat/" + ("private/" if private else "") + "send/",
        {"message": "zzzq"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="chat-panel"' in body and "<html" not in body
    return body


def both(client, user, world: Family, *, private: bool = False) -> list[str]:
    return [page(client, user, world, private=private), fragment(client, user, world, private=private)]


def message_html(html: str, message: CircleMessage) -> str:
    match = re.search(rf'<li[^>]*id="message-{message.pk}".*?</li>\n', html, flags=re.DOTALL)
    assert match, f"message {message.pk} is not on the page"
    return match.group(0)


def test_a_turn_records_what_its_reply_was_built_from_in_prompt_order(world, offline):
    reply = circle_chat_turn(conversation=world.shared(), user=world.bob, text="Tell me about the lantern")
    cited = list(CircleMessage.cited_memories.through.objects.filter(circlemessage=reply).order_by("pk"))
    assert reply.source_ids and reply.source_ids == [row.memory_id for row in cited]
    reply.refresh_from_db()
    assert reply.source_ids == [row.memory_id for row in cited]


def test_a_member_who_joins_later_reads_no_reply_built_on_a_memory_they_may_not_see(client, world, offline):
    conversation = world.shared()
    CircleMessage.objects.create(
        conversation=conversation,
        author=world.bob,
        role=CircleMessage.Role.USER,
        content="What about my gift?",
    )
    # Personal, about Bob: Alice and Bob, the readers when it was written, may both see it.
    gift = stored_reply(conversation, "GIFT-REPLY: a lantern for Bob [1]", [world.gift])
    harbor = stored_reply(conversation, "HARBOR-REPLY: the festival [1]", [world.harbor])
    dave = UserFactory()
    CircleMembership.objects.create(circle=world.circle, user=dave)

    for html in both(client, dave, world):
        assert "GIFT-REPLY" not in html and "gift for Bob" not in html
        assert PLACEHOLDER in message_html(html, gift)
        assert "HARBOR-REPLY" in message_html(html, harbor)
        assert "What about my gift?" in html  # a question a member typed stays theirs
        assert f"/memories/{world.gift.pk}/" not in html
    for reader in (world.bob, world.alice):
        assert "GIFT-REPLY" in message_html(page(client, reader, world), gift)


def test_a_newcomer_does_not_read_a_reply_whose_person_revoked_before_they_joined(client, world, offline):
    reply = stored_reply(world.shared(), "PAINTING-REPLY: Carol painted it [1]", [world.painting])
    person_set_consent(
        person=world.carol, status=ConsentStatus.REVOKED, actor=world.alice, audience=world.circle.audience
    )
    dave = UserFactory()
    CircleMembership.objects.create(circle=world.circle, user=dave)
    for html in both(client, dave, world):
        assert "PAINTING-REPLY" not in html and PLACEHOLDER in message_html(html, reply)


def test_after_consent_is_revoked_other_members_read_the_placeholder_and_the_owner_the_reply(
    client, world, offline
):
    reply = stored_reply(
        world.shared(),
        "PAINTING-REPLY: Carol painted it [1] by the harbor [2]",
        [
            world.painting,
            world.harbor,
        ],
    )
    assert "PAINTING-REPLY" in page(client, world.bob, world)
    person_set_consent(
        person=world.carol, status=ConsentStatus.REVOKED, actor=world.alice, audience=world.circle.audience
    )
    for html in both(client, world.bob, world):
        shown = message_html(html, reply)
        assert PLACEHOLDER in shown and "PAINTING-REPLY" not in html
        # Not even the source that is still visible is named or linked.
        assert f"/memories/{world.harbor.pk}/" not in shown and "Memories used" not in shown
    # Alice owns the memory: she still sees it in the circle, and so the reply.
    assert "PAINTING-REPLY" in message_html(page(client, world.alice, world), reply)
    # Consent again: the reply comes back (the gate is asked on every read, nothing is erased).
    person_set_consent(
        person=world.carol, status=ConsentStatus.GRANTED, actor=world.alice, audience=world.circle.audience
    )
    assert "PAINTING-REPLY" in message_html(page(client, world.bob, world), reply)


def test_after_the_memory_is_unshared_the_reply_is_the_placeholder_in_the_circle(client, world, offline):
    reply = stored_reply(world.shared(), "HARBOR-REPLY: the festival [1]", [world.harbor])
    memory_unshare(memory=world.harbor, circle=world.circle, by=world.alice)
    # Not shared, it is no longer in the circle for anyone, its owner included: the gate
    # answers for the circle, and Alice keeps the memory itself in her journal.
    for reader in (world.bob, world.alice):
        for html in both(client, reader, world):
            assert PLACEHOLDER in message_html(html, reply) and "HARBOR-REPLY" not in html


def test_after_the_memory_owner_leaves_their_memory_leaves_every_reply_built_on_it(client, world, offline):
    reply = stored_reply(world.shared(), "WALK-REPLY: Bob walked [1]", [world.bobs])
    dave = UserFactory()
    CircleMembership.objects.create(circle=world.circle, user=dave)
    assert "WALK-REPLY" in page(client, dave, world)
    membership_remove(circle=world.circle, user_id=world.bob.pk, by=world.bob)
    for reader in (world.alice, dave):
        for html in both(client, reader, world):
            assert PLACEHOLDER in message_html(html, reply) and "WALK-REPLY" not in html


def test_a_deleted_source_leaves_the_reply_a_placeholder_for_everyone_never_sourceless(
    client, world, offline
):
    reply = stored_reply(world.shared(), "PAINTING-REPLY: Carol painted it [1]", [world.painting])
    painting_id = world.painting.pk
    memory_delete(memory=world.painting)
    reply.refresh_from_db()
    assert not reply.cited_memories.exists()  # the citation went with the memory…
    assert reply.source_ids == [painting_id]  # …what the reply was built from did not
    for reader in (world.alice, world.bob):
        for html in both(client, reader, world):
            assert PLACEHOLDER in message_html(html, reply) and "PAINTING-REPLY" not in html


def test_a_private_reply_is_checked_for_its_one_reader(client, world, offline):
    mine = world.private(world.bob)
    # Sensitive, about Bob: his private conversation may use it (he reads alone).
    reply = stored_reply(mine, "HOSPITAL-REPLY: the visit [1]", [world.hospital])
    assert "HOSPITAL-REPLY" in message_html(page(client, world.bob, world, private=True), reply)
    person_set_consent(
        person=world.bob_person,
        status=ConsentStatus.REVOKED,
        actor=world.bob,
        actor_kind=ConsentActor.SELF,
        audience=world.circle.audience,
    )
    for html in both(client, world.bob, world, private=True):
        assert PLACEHOLDER in message_html(html, reply) and "HOSPITAL-REPLY" not in html


def test_a_sensitivity_raised_later_withholds_the_reply_from_those_it_no_longer_allows(
    client, world, offline
):
    reply = stored_reply(world.shared(), "HARBOR-REPLY: the festival [1]", [world.harbor])
    Memory.objects.filter(pk=world.harbor.pk).update(sensitivity="personal")  # about nobody
    for html in both(client, world.bob, world):
        assert PLACEHOLDER in message_html(html, reply) and "HARBOR-REPLY" not in html
    assert "HARBOR-REPLY" in message_html(page(client, world.alice, world), reply)


def test_the_placeholder_names_no_person_memory_circle_or_count(client, world, offline):
    reply = stored_reply(
        world.shared(), "Carol and alice: lantern painting [1] [2]", [world.painting, world.gift]
    )
    dave = UserFactory()
    CircleMembership.objects.create(circle=world.circle, user=dave)
    shown = message_html(page(client, dave, world), reply)
    # Everything but the header (the circle's agent's name and the time, which Dave knows).
    shown = re.sub(r'<div class="chat-who">.*?</div>', "", shown, flags=re.DOTALL)
    assert " ".join(re.sub(r"<[^>]+>", " ", shown).split()) == PLACEHOLDER
    for named in (
        "Carol",
        "Bob",
        "alice",
        "lantern",
        "Family",
        "(2)",
        str(world.painting.pk),
        str(world.gift.pk),
    ):
        assert named not in shown, named
    assert REPLY_WITHHELD == PLACEHOLDER


def test_the_selector_is_for_readers_of_the_conversation_only(world, mallory, offline):
    stored_reply(world.shared(), "HARBOR-REPLY", [world.harbor])
    with pytest.raises(PermissionDenied):
        circle_messages_for_reader(conversation=world.shared(), reader=mallory)
    with pytest.raises(PermissionDenied):
        circle_messages_for_reader(conversation=world.private(world.bob), reader=world.alice)
    readable = circle_messages_for_reader(conversation=world.shared(), reader=world.bob)
    [message] = readable.messages
    assert not message.withheld and message.citations == [world.harbor]
    assert readable.citable == {world.harbor.pk}


def test_the_migration_fills_sources_from_citations_and_fails_closed_where_they_are_gone(world):
    fill = importlib.import_module("circles.migrations.0009_circle_message_source_ids").FILL
    conversation = world.shared()
    cited = stored_reply(conversation, "CITED", [world.harbor, world.painting])
    # Answered, but its citation went with a deleted memory before sources were kept.
    bare = stored_reply(conversation, "BARE", [])
    failed = CircleMessage.objects.create(
        conversation=conversation, role=CircleMessage.Role.ASSISTANT, content="No answer.", is_error=True
    )
    question = CircleMessage.objects.create(
        conversation=conversation, author=world.bob, role=CircleMessage.Role.USER, content="Q"
    )
    CircleMessage.objects.update(source_ids=[])
    with connection.cursor() as cursor:
        cursor.execute(fill)
    sources = dict(CircleMessage.objects.values_list("pk", "source_ids"))
    assert sources[cited.pk] == [world.harbor.pk, world.painting.pk]
    assert sources[bare.pk] == [uuid.UUID(int=0)]
    assert sources[failed.pk] == [] and sources[question.pk] == []
    readable = circle_messages_for_reader(conversation=conversation, reader=world.alice)
    withheld = {message.pk for message in readable.messages if message.withheld}
    assert withheld == {bare.pk}
