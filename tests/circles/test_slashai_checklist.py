"""slashAI's privacy test checklist (seeds/001 §10.1), ported to circles.

slashAI → Keepsake: a DM is a member's private chat with the circle's agent; a
channel or guild is a circle; "#general" is the circle's shared chat; a
restricted channel is another circle; a global memory is one shared into
several circles; promotion to global is sharing an insight with no people in
it; merging is supersession. Each case asks the circle agent's retrieval (the
gate with the conversation's viewer set), never a re-implementation.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from circles.agent import circle_chat_memories, circle_conversation
from circles.models import CircleMembership
from circles.services import circle_create, memory_share
from memories.gate import agent_visible_memories
from memories.services import ParticipantSpec, memory_create
from memories.supersession import memory_supersede
from people.models import ConsentActor, ConsentStatus, Person
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db


@pytest.fixture
def bob_in_alices_journal(alice, bob, family) -> Person:
    person = person_create(owner=alice, display_name="Bob")
    Person.objects.filter(pk=person.pk).update(linked_user=bob)
    # Bob is linked, so Bob grants for himself.
    person_set_consent(
        person=person,
        status=ConsentStatus.GRANTED,
        actor=bob,
        actor_kind=ConsentActor.SELF,
        audience=family.audience,
    )
    return person


def found(circle, user, question: str, *, private: bool) -> set:
    conversation = circle_conversation(circle=circle, user=user, private=private)
    return {memory.pk for memory in circle_chat_memories(conversation=conversation, question=question)}


def test_dm_memory_stays_in_dm(alice, bob, family, bob_in_alices_journal):
    dm = memory_create(
        owner=alice,
        body="Bob's therapy appointment went well",
        sensitivity="sensitive",
        participants=[ParticipantSpec(person=bob_in_alices_journal)],
    )
    memory_share(memory=dm, circle=family, by=alice)
    assert dm.pk not in found(family, bob, "therapy appointment", private=False)
    assert dm.pk not in found(family, alice, "therapy appointment", private=False)


def test_dm_memory_appears_in_dm(alice, bob, family, bob_in_alices_journal):
    dm = memory_create(
        owner=alice,
        body="Bob's therapy appointment went well",
        sensitivity="sensitive",
        participants=[ParticipantSpec(person=bob_in_alices_journal)],
    )
    memory_share(memory=dm, circle=family, by=alice)
    # A sensitive memory reaches the circle's agent only once its owner cleared it for them.
    assert dm.pk not in found(family, bob, "therapy appointment", private=True)
    family.agent_may_read_sensitive = True
    family.save(update_fields=["agent_may_read_sensitive"])
    assert dm.pk in found(family, bob, "therapy appointment", private=True)
    # …and only in the DM of the member it is about.
    carol = bob.__class__.objects.create_user(username="carol", password="x" * 12)
    CircleMembership.objects.create(circle=family, user=carol)
    assert dm.pk not in found(family, carol, "therapy appointment", private=True)


def test_restricted_stays_restricted_and_appears_in_its_own_circle(alice, bob, family):
    care_team = circle_create(owner=alice, name="Care team")
    CircleMembership.objects.create(circle=care_team, user=bob)
    restricted = memory_create(owner=alice, body="medication schedule review", sensitivity="public")
    memory_share(memory=restricted, circle=care_team, by=alice)
    assert restricted.pk not in found(family, bob, "medication schedule", private=False)
    assert restricted.pk not in found(family, bob, "medication schedule", private=True)
    assert restricted.pk in found(care_team, bob, "medication schedule", private=False)


def test_circle_public_crosses_conversations_of_that_circle(alice, bob, family):
    public = memory_create(owner=alice, body="picnic at the lake on Sunday", sensitivity="public")
    memory_share(memory=public, circle=family, by=alice)
    for user in (alice, bob):
        for private in (False, True):
            assert public.pk in found(family, user, "picnic lake", private=private)


def test_circle_public_does_not_cross_circles(alice, bob, family):
    work = circle_create(owner=alice, name="Work")
    CircleMembership.objects.create(circle=work, user=bob)  # same people, another circle
    public = memory_create(owner=alice, body="picnic at the lake on Sunday", sensitivity="public")
    memory_share(memory=public, circle=family, by=alice)
    assert public.pk not in found(work, bob, "picnic lake", private=False)
    assert public.pk not in found(work, alice, "picnic lake", private=True)


def test_shared_into_several_circles_crosses_them(alice, bob, family):
    work = circle_create(owner=alice, name="Work")
    CircleMembership.objects.create(circle=work, user=bob)
    insight = memory_create(
        owner=alice,
        body="visual fraction models help concrete thinkers",
        kind="knowledge",
        sensitivity="public",
    )
    for circle in (family, work):
        memory_share(memory=insight, circle=circle, by=alice)
        assert insight.pk in found(circle, bob, "fraction models", private=False)


def test_a_sensitive_memory_is_never_promoted_to_a_shared_reply(alice, bob, family, bob_in_alices_journal):
    work = circle_create(owner=alice, name="Work")
    CircleMembership.objects.create(circle=work, user=bob)
    person_set_consent(
        person=bob_in_alices_journal,
        status=ConsentStatus.GRANTED,
        actor=bob,
        actor_kind=ConsentActor.SELF,
        audience=work.audience,
    )
    stress = memory_create(
        owner=alice,
        body="Bob is stressed about the debt",
        sensitivity="sensitive",
        participants=[ParticipantSpec(person=bob_in_alices_journal)],
    )
    for circle in (family, work):
        memory_share(memory=stress, circle=circle, by=alice)
        assert stress.pk not in found(circle, bob, "stressed debt", private=False)


def test_cross_user_circle_shares_never_reach_another_owners_agents(alice, bob, family):
    bobs = memory_create(owner=bob, body="Bob's own picnic notes", sensitivity="public")
    memory_share(memory=bobs, circle=family, by=bob)
    assert bobs.pk in found(family, alice, "picnic notes", private=False)
    assert not agent_visible_memories(alice).filter(pk=bobs.pk).exists()


def test_merge_within_the_same_level(alice):
    older = memory_create(owner=alice, body="Anna likes tea", sensitivity="personal")
    newer = memory_create(owner=alice, body="Anna likes green tea", sensitivity="personal")
    assert memory_supersede(owner=alice, older=older, newer=newer).superseded_by_id == newer.pk


def test_merge_blocked_across_levels(alice):
    older = memory_create(owner=alice, body="Anna's diagnosis", sensitivity="sensitive")
    newer = memory_create(owner=alice, body="Anna's diagnosis, updated", sensitivity="public")
    with pytest.raises(ValidationError):
        memory_supersede(owner=alice, older=older, newer=newer)
    older.refresh_from_db()
    assert older.superseded_by_id is None


def test_a_circle_of_one_shares_nothing_the_owner_alone_may_see_into_its_shared_chat(alice):
    """The shared chat is read by whoever joins later: owning a memory waives nothing there."""
    solo = circle_create(owner=alice, name="Solo")
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice, audience=solo.audience)
    withheld = memory_create(
        owner=alice,
        body="lantern evening with Carol",
        sensitivity="public",
        participants=[ParticipantSpec(person=carol)],
    )
    secret = memory_create(owner=alice, body="lantern and my own diagnosis", sensitivity="sensitive")
    public = memory_create(owner=alice, body="lantern festival by the harbor", sensitivity="public")
    for memory in (withheld, secret, public):
        memory_share(memory=memory, circle=solo, by=alice)
    person_set_consent(person=carol, status=ConsentStatus.REVOKED, actor=alice, audience=solo.audience)

    shared = found(solo, alice, "lantern", private=False)
    assert public.pk in shared
    assert withheld.pk not in shared and secret.pk not in shared
    # No agent is the owner: in Alice's private chat the circle's agent uses only what her own
    # agents may read and the circle's people consented to, and nothing sensitive unless cleared.
    private = found(solo, alice, "lantern", private=True)
    assert public.pk in private
    assert withheld.pk not in private and secret.pk not in private
    solo.agent_may_read_sensitive = True
    solo.save(update_fields=["agent_may_read_sensitive"])
    private = found(solo, alice, "lantern", private=True)
    assert {public.pk, secret.pk} <= private and withheld.pk not in private
