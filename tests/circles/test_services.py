"""Circles' services and the gate's circle case, against the real database."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.db.utils import InternalError, ProgrammingError
from django.utils import timezone

from circles.models import MAX_MEMBERS, CircleMembership, JoinRequestStatus, MemoryShare
from circles.services import (
    InviteInvalid,
    ShareRefused,
    circle_create,
    circle_delete,
    invite_accept,
    invite_create,
    invite_revoke,
    join_request_approve,
    join_request_decline,
    membership_remove,
    memory_share,
)
from memories.gate import circle_visible_memories
from memories.gate_explain import memory_privacy_audit
from memories.models import Memory
from memories.retrieval import circle_memory_search
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentEvent, ConsentStatus, Person, PersonConsent
from people.services import person_create, person_delete, person_set_consent
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def visible_to(circle, *users) -> set:
    return set(circle_visible_memories(circle.pk, [user.pk for user in users]).values_list("pk", flat=True))


def grant(person, circle, status=ConsentStatus.GRANTED):
    return person_set_consent(person=person, status=status, actor=person.owner, audience=circle.audience)


def test_circle_create_makes_the_creator_its_owner_member(alice):
    circle = circle_create(owner=alice, name="  Care   team ")
    assert circle.name == "Care team"
    assert CircleMembership.objects.get(circle=circle, user=alice).role == "owner"


@pytest.mark.parametrize("name", ["", "   ", "x" * 81])
def test_circle_names_are_checked(alice, name):
    with pytest.raises(ValidationError):
        circle_create(owner=alice, name=name)


def test_invite_then_request_then_approval_makes_a_member(alice, mallory):
    circle = circle_create(owner=alice, name="Family")
    new = invite_create(circle=circle, by=alice)
    assert new.invite.token_hash != new.token and len(new.token) > 30
    assert new.invite.expires_at - timezone.now() > timedelta(days=13)
    request = invite_accept(token=new.token, user=mallory)
    assert request.status == JoinRequestStatus.PENDING
    assert invite_accept(token=new.token, user=mallory) == request  # asking twice is one request
    assert not CircleMembership.objects.filter(circle=circle, user=mallory).exists()
    join_request_approve(request=request, by=alice)
    assert CircleMembership.objects.filter(circle=circle, user=mallory).exists()


def test_only_the_owner_approves_and_a_decision_is_final(alice, bob, family, mallory):
    request = invite_accept(token=invite_create(circle=family, by=alice).token, user=mallory)
    with pytest.raises(PermissionDenied):
        join_request_approve(request=request, by=bob)
    join_request_decline(request=request, by=alice)
    with pytest.raises(ValidationError):
        join_request_approve(request=request, by=alice)
    assert not CircleMembership.objects.filter(circle=family, user=mallory).exists()


def test_expired_revoked_and_unknown_invites_are_refused_clearly(alice, family, mallory):
    expired = invite_create(circle=family, by=alice)
    expired.invite.expires_at = timezone.now() - timedelta(seconds=1)
    expired.invite.save()
    revoked = invite_create(circle=family, by=alice)
    invite_revoke(invite=revoked.invite, by=alice)
    for token, words in [(expired.token, "expired"), (revoked.token, "withdrawn"), ("nope", "not valid")]:
        with pytest.raises(InviteInvalid, match=words):
            invite_accept(token=token, user=mallory)


def test_a_circle_holds_at_most_fifty_members(alice):
    circle = circle_create(owner=alice, name="Class")
    CircleMembership.objects.bulk_create(
        [CircleMembership(circle=circle, user=UserFactory()) for _ in range(MAX_MEMBERS - 1)]
    )
    with pytest.raises(ValidationError, match="at most 50"):
        invite_accept(token=invite_create(circle=circle, by=alice).token, user=UserFactory())


def test_share_is_refused_naming_each_person_and_nothing_is_written(alice, family):
    carol = person_create(owner=alice, display_name="Carol")
    dan = person_create(owner=alice, display_name="Dan")
    grant(dan, family, ConsentStatus.REVOKED)
    memory = memory_create(
        owner=alice, body="Carol's birthday", source_person=dan, participants=[ParticipantSpec(person=carol)]
    )
    with pytest.raises(ShareRefused) as refused:
        memory_share(memory=memory, circle=family, by=alice)
    assert [(item.person.display_name, item.status) for item in refused.value.not_consented] == [
        ("Carol", "pending"),
        ("Dan", "revoked"),
    ]
    assert not MemoryShare.objects.exists()


def test_only_the_owner_shares_and_only_into_their_circles(alice, bob, family, mallory):
    memory = memory_create(owner=alice, body="a walk", sensitivity="public")
    with pytest.raises(PermissionDenied):
        memory_share(memory=memory, circle=family, by=bob)
    elsewhere = circle_create(owner=mallory, name="Mallory's")
    with pytest.raises(PermissionDenied):
        memory_share(memory=memory, circle=elsewhere, by=alice)


def test_member_sees_public_shared_memory_until_consent_is_revoked(alice, bob, family):
    carol = person_create(owner=alice, display_name="Carol")
    grant(carol, family)
    memory = memory_create(
        owner=alice,
        body="Carol at the lake",
        sensitivity="public",
        participants=[ParticipantSpec(person=carol)],
    )
    assert visible_to(family, bob) == set()  # not shared yet: private by default
    memory_share(memory=memory, circle=family, by=alice)
    assert visible_to(family, bob) == {memory.pk}
    grant(carol, family, ConsentStatus.REVOKED)
    assert visible_to(family, bob) == set()
    assert visible_to(family, alice) == {memory.pk}  # the owner always sees their own
    grant(carol, family)
    assert visible_to(family, bob) == {memory.pk}


def test_a_kept_gate_statement_answers_as_a_new_one_and_callers_cannot_change_it(alice, bob, family):
    # The gate keeps its built statement per viewer (memories/gate.py, _BUILT_KEPT): asked
    # again it is the same statement, which reads consent and membership when it runs, and
    # what a caller adds to its copy never reaches the next caller.
    carol = person_create(owner=alice, display_name="Carol")
    grant(carol, family)
    first, second = (
        memory_create(
            owner=alice, body=body, sensitivity="public", participants=[ParticipantSpec(person=carol)]
        )
        for body in ("Carol at the lake", "Carol at the market")
    )
    for memory in (first, second):
        memory_share(memory=memory, circle=family, by=alice)
    gate = circle_visible_memories(family.pk, [bob.pk])
    assert str(circle_visible_memories(str(family.pk), [bob.pk, bob.pk]).query) == str(gate.query)
    assert set(gate.filter(pk=first.pk).values_list("pk", flat=True)) == {first.pk}
    assert set(gate.exclude(pk=first.pk).values_list("pk", flat=True)) == {second.pk}
    assert visible_to(family, bob) == {first.pk, second.pk}
    grant(carol, family, ConsentStatus.REVOKED)
    assert visible_to(family, bob) == set()
    membership_remove(circle=family, user_id=bob.pk, by=alice)
    grant(carol, family)
    assert visible_to(family, bob) == set()
    assert visible_to(family, alice) == {first.pk, second.pk}


def test_agents_consent_does_not_open_a_circle(alice, bob, family):
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    memory = memory_create(
        owner=alice, body="x", sensitivity="public", participants=[ParticipantSpec(person=carol)]
    )
    with pytest.raises(ShareRefused):
        memory_share(memory=memory, circle=family, by=alice)


def test_sensitivity_rules_for_members(alice, bob, family):
    about_bob = person_create(owner=alice, display_name="Bob")
    # Granted while Alice still decides; Bob links afterwards and the grant stays.
    grant(about_bob, family)
    Person.objects.filter(pk=about_bob.pk).update(linked_user=bob)
    dave = UserFactory()
    CircleMembership.objects.create(circle=family, user=dave)
    memories = {}
    for sensitivity in ["public", "personal", "sensitive"]:
        memories[sensitivity] = memory_create(
            owner=alice,
            body=f"{sensitivity} note about Bob",
            sensitivity=sensitivity,
            participants=[ParticipantSpec(person=about_bob)],
        )
        memory_share(memory=memories[sensitivity], circle=family, by=alice)
    untagged_personal = memory_create(owner=alice, body="my own thought", sensitivity="personal")
    memory_share(memory=untagged_personal, circle=family, by=alice)
    ids = {key: memory.pk for key, memory in memories.items()}
    assert visible_to(family, bob) == {ids["public"], ids["personal"], ids["sensitive"]}
    assert visible_to(family, dave) == {ids["public"]}
    # Several viewers: the intersection, and sensitive never.
    assert visible_to(family, bob, dave) == {ids["public"]}
    assert visible_to(family, alice, bob) == {ids["public"], ids["personal"]}
    assert visible_to(family, alice) == {*ids.values(), untagged_personal.pk}


def test_leaving_and_removal_take_effect_on_the_next_query(alice, bob, family):
    memory = memory_create(owner=alice, body="picnic", sensitivity="public")
    memory_share(memory=memory, circle=family, by=alice)
    assert visible_to(family, bob) == {memory.pk}
    membership_remove(circle=family, user_id=bob.pk, by=bob)
    assert visible_to(family, bob) == set()
    with pytest.raises(ValidationError):
        membership_remove(circle=family, user_id=alice.pk, by=alice)


def test_an_old_invite_does_not_restore_a_removed_member(alice, bob, family):
    new = invite_create(circle=family, by=alice)
    membership_remove(circle=family, user_id=bob.pk, by=alice)
    request = invite_accept(token=new.token, user=bob)
    assert request.status == JoinRequestStatus.PENDING
    assert not CircleMembership.objects.filter(circle=family, user=bob).exists()


def test_deleting_a_circle_removes_shares_never_memories(alice, family):
    memory = memory_create(owner=alice, body="kept", sensitivity="public")
    memory_share(memory=memory, circle=family, by=alice)
    circle_delete(circle=family, by=alice)
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert not MemoryShare.objects.exists()


def test_circle_search_goes_through_the_gate(alice, bob, family):
    carol = person_create(owner=alice, display_name="Carol")
    open_memory = memory_create(owner=alice, body="lantern festival", sensitivity="public")
    closed = memory_create(
        owner=alice,
        body="lantern by the lake",
        sensitivity="public",
        participants=[ParticipantSpec(person=carol)],
    )
    memory_share(memory=open_memory, circle=family, by=alice)
    grant(carol, family)
    memory_share(memory=closed, circle=family, by=alice)
    grant(carol, family, ConsentStatus.PENDING)
    hits = circle_memory_search(family.pk, [bob.pk], "lantern", query_embedding=[1.0] + [0.0] * 383)
    assert [hit.memory.pk for hit in hits] == [open_memory.pk]


def test_privacy_audit_answers_from_the_gate(alice, bob, family):
    carol = person_create(owner=alice, display_name="Carol")
    grant(carol, family)
    memory = memory_create(
        owner=alice, body="x", sensitivity="public", participants=[ParticipantSpec(person=carol)]
    )
    memory_share(memory=memory, circle=family, by=alice)
    audit = memory_privacy_audit(memory=memory)
    assert audit.agents.visible is False
    assert "Carol" in audit.agents.reasons[0]
    [circle] = audit.circles
    assert {entry.label: entry.visible for entry in circle.members} == {"alice": True, "bob": True}
    grant(carol, family, ConsentStatus.REVOKED)
    [circle] = memory_privacy_audit(memory=memory).circles
    bob_entry = next(entry for entry in circle.members if entry.label == "bob")
    assert bob_entry.visible is False and "Carol" in bob_entry.reasons[0]


def test_consent_history_is_append_only_and_outlives_the_person(alice, family):
    carol = person_create(owner=alice, display_name="Carol")
    event = grant(carol, family)
    assert event.audience == family.audience and event.person_name == "Carol"
    for statement in [
        "UPDATE people_consentevent SET reason = 'edited' WHERE id = %s",
        "DELETE FROM people_consentevent WHERE id = %s",
    ]:
        with pytest.raises((InternalError, ProgrammingError)), connection.cursor() as cursor:
            from django.db import transaction

            with transaction.atomic():
                cursor.execute(statement, [event.pk])
    person_delete(person=carol)
    event.refresh_from_db()
    assert event.person_id is None and event.person_name == "Carol"
    assert ConsentEvent.objects.filter(pk=event.pk).exists()


def test_agents_consent_is_mirrored_per_audience(alice):
    carol = person_create(owner=alice, display_name="Carol")
    assert PersonConsent.objects.get(person=carol, audience="agents").status == "pending"
    person_set_consent(person=carol, status="granted", actor=alice, reason="she said yes")
    row = PersonConsent.objects.get(person=carol, audience="agents")
    assert (row.status, row.reason, row.updated_by) == ("granted", "she said yes", "owner")
    Person.objects.filter(pk=carol.pk).update(consent_status="revoked")
    assert PersonConsent.objects.get(person=carol, audience="agents").status == "revoked"
