"""Property: a linked person decides their own consent, and the gate follows at once.

Hypothesis generates small worlds — two to four users, a few people in their
journals, one or two circles for each of their owners (a watcher who is in every
circle and in no journal reads them), each person in one public memory shared
into every circle of its owner — with consent recorded by the owner per
audience, and most people linked to another user; then a run of operations: the
owner sets a consent (any status, `agents` or one of their circles), the linked
user sets their own, link, unlink (either side), and deletion of a linked
user's account.

A plain-Python model below, which shares no code with the services, predicts
each operation: refused (PermissionDenied) exactly when the owner tries to grant
a linked person, and otherwise which statuses change and which consent events
are appended. After the world is built and after every operation:

(a) every status and every consent event (who, as whom, what) is what the model
    says, and a linked person is granted for an audience only if they granted it
    themselves since they were linked (the last change since the link, in the
    model and as the last ConsentEvent's actor_kind and actor) — or if nothing
    has changed since the link and the grant was already there when they linked
    (linking keeps the owner's earlier record; the person sees it, "by <owner>",
    and may revoke it);
(b) the gate follows immediately: the memory is among
    agent_visible_memories(owner) exactly when tests/memories/consent_oracle.py
    says an agent may see it given the person's `agents` status, and among
    circle_visible_memories(circle, [watcher]) exactly when the person is granted
    for that circle.

Each example lives in a savepoint rolled back at its end. Quick by default (the
"default" profile); `--hypothesis-profile=thorough` runs thousands of examples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from hypothesis import event, given
from hypothesis import strategies as st

from circles.models import Circle, CircleMembership, MembershipRole
from circles.services import circle_create, memory_share
from linked.services import person_link_accept, person_link_invite_create
from linked.services import person_unlink as unlink_service
from memories.gate import agent_visible_memories, circle_visible_memories
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentActor, ConsentEvent, Person, PersonConsent
from people.services import person_create, person_set_consent
from portability.services import account_delete
from tests.factories import UserFactory
from tests.memories.consent_oracle import OracleMemory, OraclePerson, OracleWorld
from tests.privacy import privacy_settings

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery"  # UserFactory's
STATUSES = ["granted", "pending", "revoked"]
GRANTED, PENDING, REVOKED = STATUSES
AGENTS = "agents"
OWNER, SELF = "owner", "self"

person_spec = st.fixed_dictionaries(
    {
        "owner": st.integers(0, 3),
        "agents": st.sampled_from(STATUSES),
        "circles": st.tuples(st.sampled_from(STATUSES), st.sampled_from(STATUSES)),
        "linked": st.sampled_from([None, 0, 1, 2, 3]),  # another user (modulo), mostly
    }
)
# One shape for every operation: (kind, person or user, audience or user or side, status).
# Audience 0 is the owner's agents, 1 and 2 their circles (modulo how many they have).
# Consent changes are drawn most often, and grants most often among them: they are what
# the property is about. "person_sets" picks among the people linked at the time.
operation = st.tuples(
    st.sampled_from(["owner_sets"] * 3 + ["person_sets"] * 3 + ["link", "unlink", "delete_account"]),
    st.integers(0, 7),
    st.integers(0, 3),
    st.sampled_from([GRANTED, *STATUSES]),
)
world_spec = st.fixed_dictionaries(
    {
        "users": st.integers(2, 4),
        "circles_each": st.integers(1, 2),
        "people": st.lists(person_spec, min_size=1, max_size=6),
        "operations": st.lists(operation, min_size=1, max_size=10),
    }
)


# --- the model ---------------------------------------------------------------------


@dataclass
class ModelEvent:
    actor_kind: str
    actor: int | None  # a user index
    new_status: str


@dataclass
class ModelPerson:
    owner: int
    audiences: list[str]  # "agents", then "circle:<id>" for each of the owner's circles
    status: dict[str, str] = field(default_factory=dict)
    events: dict[str, list[ModelEvent]] = field(default_factory=dict)
    linked: int | None = None
    # When the current link began: how many events each audience had, and its status then.
    events_at_link: dict[str, int] = field(default_factory=dict)
    status_at_link: dict[str, str] = field(default_factory=dict)
    alive: bool = True

    def __post_init__(self) -> None:
        for audience in self.audiences:
            self.status.setdefault(audience, PENDING)  # no answer is pending
            self.events.setdefault(audience, [])

    def change(self, audience: str, status: str, actor_kind: str, actor: int | None) -> None:
        """A change appends one event; setting the current status again records nothing."""
        if self.status[audience] != status:
            self.status[audience] = status
            self.events[audience].append(ModelEvent(actor_kind, actor, status))

    def owner_refused(self, status: str) -> bool:
        """The owner may always be more careful, but never grants for a linked person."""
        return status == GRANTED and self.linked is not None

    def link(self, user: int) -> None:
        self.linked = user
        self.events_at_link = {audience: len(events) for audience, events in self.events.items()}
        self.status_at_link = dict(self.status)

    def granted_by_themself(self, audience: str) -> bool:
        since_link = self.events[audience][self.events_at_link[audience] :]
        if since_link:
            return since_link[-1].actor_kind == SELF and since_link[-1].actor == self.linked
        return self.status_at_link[audience] == GRANTED


# --- the world in the database and in the model ----------------------------------------


@dataclass
class World:
    users: list  # index → User, or None once deleted
    watcher: object
    circles: dict[int, list[Circle]]  # owner index → circles
    people: list[int]  # person pks
    memories: list[Memory]
    model: list[ModelPerson]

    def person(self, number: int) -> Person:
        """Loaded afresh for every operation, as each request of a view does."""
        return Person.objects.get(pk=self.people[number])

    def user_pk(self, number: int | None) -> int | None:
        """A deleted account's events keep no actor (the link to the user is cleared)."""
        user = self.users[number] if number is not None else None
        return user.pk if user is not None else None

    def user_index(self, user_id: int | None) -> int | None:
        return next((i for i, user in enumerate(self.users) if user is not None and user.pk == user_id), None)


def build_world(spec: dict) -> World:
    users = [UserFactory() for _ in range(spec["users"])]
    watcher = UserFactory()
    owners = {item["owner"] % len(users) for item in spec["people"]}
    circles: dict[int, list[Circle]] = {index: [] for index in range(len(users))}
    for index in sorted(owners):
        for number in range(spec["circles_each"]):
            circle = circle_create(owner=users[index], name=f"Circle {index}.{number}")
            # The watcher's membership as a row: joining is not what this test is about.
            CircleMembership.objects.create(circle=circle, user=watcher, role=MembershipRole.MEMBER)
            circles[index].append(circle)
    world = World(users=users, watcher=watcher, circles=circles, people=[], memories=[], model=[])
    for number, item in enumerate(spec["people"]):
        owner_index = item["owner"] % len(users)
        owner = users[owner_index]
        person = person_create(owner=owner, display_name=f"P{number}")
        memory = memory_create(
            owner=owner,
            body=f"P{number} and I walked along the harbor.",
            kind="knowledge",
            sensitivity="public",
            participants=[ParticipantSpec(person=person, role="present")],
        )
        own_circles = circles[owner_index]
        model = ModelPerson(owner=owner_index, audiences=[AGENTS, *(f"circle:{c.pk}" for c in own_circles)])
        world.people.append(person.pk)
        world.memories.append(memory)
        world.model.append(model)
        # Shared into each of the owner's circles while granted for it, then set to the
        # spec's status there: the share stays, and the gate decides at read time.
        for circle, status in zip(own_circles, item["circles"], strict=False):
            audience = f"circle:{circle.pk}"
            owner_sets(world, number, audience, GRANTED)
            memory_share(memory=memory, circle=circle, by=owner)
            owner_sets(world, number, audience, status)
        owner_sets(world, number, AGENTS, item["agents"])
    for number, item in enumerate(spec["people"]):
        if item["linked"] is not None:
            link(world, number, item["linked"])
    return world


def owner_sets(world: World, number: int, audience: str, status: str) -> bool:
    model, person = world.model[number], world.person(number)
    owner = world.users[model.owner]
    if model.owner_refused(status):
        event("the owner tried to grant a linked person")
        with pytest.raises(PermissionDenied):
            person_set_consent(person=person, status=status, actor=owner, audience=audience)
        return True
    person_set_consent(person=person, status=status, actor=owner, audience=audience)
    model.change(audience, status, OWNER, model.owner)
    return True


def person_sets(world: World, number: int, audience: str, status: str) -> bool:
    model = world.model[number]
    if model.linked is None:
        return False  # nobody to decide as the person
    person = world.person(number)
    person_set_consent(
        person=person,
        status=status,
        actor=world.users[model.linked],
        audience=audience,
        actor_kind=ConsentActor.SELF,
    )
    model.change(audience, status, SELF, model.linked)
    if status == GRANTED:
        event("a linked person granted for themself")
    return True


def link(world: World, number: int, user_number: int) -> bool:
    model = world.model[number]
    others = [i for i, user in enumerate(world.users) if user is not None and i != model.owner]
    if model.linked is not None or not others:
        return False
    person = world.person(number)
    target = others[user_number % len(others)]
    _, token = person_link_invite_create(person=person, by=world.users[model.owner])
    person_link_accept(token=token, user=world.users[target])
    model.link(target)
    return True


def unlink(world: World, number: int, side: str) -> bool:
    model = world.model[number]
    if model.linked is None:
        return False
    by = world.users[model.owner if side == "owner" else model.linked]
    unlink_service(person=world.person(number), by=by)
    model.linked = None
    return True


def delete_account(world: World, user_number: int) -> bool:
    """A linked user deletes their account: nobody can decide for them any more."""
    deleted = user_number % len(world.users)
    if world.users[deleted] is None or not any(m.alive and m.linked == deleted for m in world.model):
        return False
    account_delete(user=world.users[deleted], password=PASSWORD)
    event("a linked user deleted their account")
    for model in world.model:
        if not model.alive:
            continue
        if model.owner == deleted:
            model.alive = False  # their journal goes with them
        elif model.linked == deleted:
            # Revoked, as the person, for agents and for every audience with a recorded
            # answer (an audience never answered has no row: it stays pending).
            for audience in model.audiences:
                if audience == AGENTS or model.events[audience]:
                    model.change(audience, REVOKED, SELF, deleted)
            model.linked = None
    world.users[deleted] = None
    return True


def apply(world: World, op: tuple) -> bool:
    """Carry out one operation; False when it does not apply to this world (nothing was called)."""
    kind, number, other, status = op
    if kind == "delete_account":
        return delete_account(world, number)
    if kind == "person_sets":
        linked = [n for n, model in enumerate(world.model) if model.alive and model.linked is not None]
        if not linked:
            return False
        number = linked[number % len(linked)]
    number %= len(world.model)
    model = world.model[number]
    if not model.alive:
        return False
    if kind == "owner_sets":
        return owner_sets(world, number, model.audiences[other % len(model.audiences)], status)
    if kind == "person_sets":
        return person_sets(world, number, model.audiences[other % len(model.audiences)], status)
    if kind == "link":
        return link(world, number, other)
    return unlink(world, number, "owner" if other % 2 == 0 else "person")


# --- the checks ----------------------------------------------------------------------


def check(world: World) -> None:
    alive = [number for number, model in enumerate(world.model) if model.alive]
    dead = [world.people[number] for number, model in enumerate(world.model) if not model.alive]
    assert not Person.objects.filter(pk__in=dead).exists()
    people = Person.objects.in_bulk([world.people[number] for number in alive])
    circle_rows = {
        (row.person_id, row.audience): row.status
        for row in PersonConsent.objects.filter(person__in=list(people)).exclude(audience=AGENTS)
    }
    events: dict[tuple, list[ConsentEvent]] = {}
    for recorded_event in ConsentEvent.objects.filter(person__in=list(people)).order_by("pk"):
        events.setdefault((recorded_event.person_id, recorded_event.audience), []).append(recorded_event)

    for number in alive:
        model, person = world.model[number], people[world.people[number]]
        assert world.user_index(person.linked_user_id) == model.linked
        for audience in model.audiences:
            if audience == AGENTS:
                status = person.consent_status
            else:
                status = circle_rows.get((person.pk, audience), PENDING)
            assert status == model.status[audience], (number, audience)
            recorded = events.get((person.pk, audience), [])
            assert [(e.actor_kind, e.actor_id, e.new_status) for e in recorded] == [
                (e.actor_kind, world.user_pk(e.actor), e.new_status) for e in model.events[audience]
            ], (number, audience)
            if model.linked is None:
                continue
            # (a) While linked, only the person moves themself to granted.
            linked_user = world.users[model.linked].pk
            since_link = recorded[model.events_at_link[audience] :]
            for since in since_link:
                if since.new_status == GRANTED:
                    assert (since.actor_kind, since.actor_id) == (SELF, linked_user), (number, audience)
            if status == GRANTED:
                if not since_link:
                    event("a grant recorded before the link stayed")
                assert model.granted_by_themself(audience), (number, audience)
                if since_link:
                    assert (since_link[-1].actor_kind, since_link[-1].actor_id) == (SELF, linked_user)

    # (b) The gate, for agents and for each circle, reads the current statuses.
    now = timezone.now()
    for owner_number, owner in enumerate(world.users):
        if owner is None:
            continue
        mine = [number for number in alive if world.model[number].owner == owner_number]
        if not mine:
            continue
        visible = set(agent_visible_memories(owner).values_list("pk", flat=True))
        for number in mine:
            memory, person_id = world.memories[number], str(world.people[number])
            oracle = OracleWorld(
                people={
                    person_id: OraclePerson(
                        id=person_id, owner=str(owner.pk), consent_status=world.model[number].status[AGENTS]
                    )
                }
            )
            expected = oracle.agent_may_see(
                OracleMemory(
                    id=str(memory.pk),
                    owner=str(owner.pk),
                    words=[],
                    kind=memory.kind,
                    occurred_at=memory.occurred_at,
                    participants={person_id: "present"},
                    expires_at=memory.expires_at,
                ),
                now=now,
            )
            assert (memory.pk in visible) == expected, (number, "agents")
        for circle in world.circles[owner_number]:
            audience = f"circle:{circle.pk}"
            seen = set(circle_visible_memories(circle.pk, [world.watcher.pk]).values_list("pk", flat=True))
            for number in mine:
                granted = world.model[number].status[audience] == GRANTED
                assert (world.memories[number].pk in seen) == granted, (number, audience)


class _Rollback(Exception):
    pass


@privacy_settings
@given(spec=world_spec)
def test_only_a_linked_person_grants_for_themself_and_the_gate_follows_at_once(spec):
    # One savepoint per example, rolled back: every example starts from an empty world.
    try:
        with transaction.atomic():
            world = build_world(spec)
            check(world)
            for op in spec["operations"]:
                if apply(world, op):
                    check(world)
            raise _Rollback
    except _Rollback:
        pass
