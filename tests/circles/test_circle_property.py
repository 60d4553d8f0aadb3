"""Property: what circle members see, through every surface, against an independent reference policy.

Hypothesis generates small worlds — three to six users, one to three circles with
members, people with consent per audience (some linked to users), memories with
participants and roles, sources, sensitivities, expiry and supersession, shares
written directly or through the sharing service — and then a run of changes:
consent per audience, members added, leaving or removed (through the service, or
a membership row deleted behind the service's back), shares and unshares, links,
a circle deleted. After the world is built and after every change, each circle
surface is compared with tests/memories/consent_oracle.py, which shares no code
with them:

- the gate's circle case (`circle_visible_memories`) for every circle and every
  single viewer, members or not, and for a few sets of viewers;
- the circle timeline selector (same memories, newest first);
- circle search with a fixed query vector: only what the oracle allows, exactly
  the text and vector matches when the limit covers them, as many as asked otherwise;
- the privacy audit's yes/no for every member of every circle a memory is shared into;
- the sharing service: it refuses exactly when the oracle finds someone not granted,
  naming exactly those people with their status.

After the changes each member's own agent reads each circle (A2A) through the API and
the MCP tools, and every agent variant of the gate is compared with the oracle's agent
policy at every step. Each example lives in a savepoint rolled back at its end; every run
takes tests/privacy.py's PRIVACY_EXAMPLES (100), `--hypothesis-profile=thorough` thousands.
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import timedelta
from unittest import mock

import numpy as np
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.test import Client, override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from accounts.models import TokenKind
from accounts.services import access_token_create
from circles.models import Circle, CircleMembership, MembershipRole, MemoryShare
from circles.selectors import circle_timeline
from circles.services import (
    ShareRefused,
    circle_create,
    circle_delete,
    membership_remove,
    memory_share,
    memory_unshare,
)
from memories import retrieval
from memories.gate import circle_visible_memories
from memories.gate_explain import memory_privacy_audit
from memories.models import EMBEDDING_DIMENSIONS, Memory, MemoryParticipant
from memories.retrieval import circle_memory_search
from memories.search import settings as search_settings
from people.models import Person, PersonConsent
from people.services import person_set_consent
from tests.api.conftest import ApiClient
from tests.factories import UserFactory
from tests.index_scans import unbounded_index_scans
from tests.memories.consent_oracle import OracleCircle, OracleMemory, OraclePerson, OracleWorld
from tests.privacy import privacy_settings

pytestmark = pytest.mark.django_db

# No stop words, and no two words share an English stem (see the oracle's text_matches).
VOCABULARY = ["lantern", "orchard", "violin", "harbor", "meadow", "glacier"]
STATUSES = ["granted", "pending", "revoked"]
ROLES = ["subject", "subject", "present", "source"]
SENSITIVITIES = ["public", "personal", "sensitive"]
AGENTS = "agents"
# Audiences in a spec: an index into the world's circles, or the owner's agents.
AUDIENCES = st.sampled_from([AGENTS, 0, 1, 2])

# None: no answer recorded (pending). Granted is drawn more often so that more of
# what is shared is actually open and the sensitivity rules have work to do.
CIRCLE_STATUS = st.sampled_from([None, "granted", "granted", "pending", "revoked"])

# People and memories belong to the first three users (the journals); every user
# may be a member, a viewer and a linked person.
person_spec = st.fixed_dictionaries(
    {
        "owner": st.integers(0, 2),
        # Per audience: the agents, and each circle by its index.
        "consents": st.fixed_dictionaries(
            {AGENTS: st.sampled_from(STATUSES), 0: CIRCLE_STATUS, 1: CIRCLE_STATUS, 2: CIRCLE_STATUS}
        ),
        # Linked to the user this many places after the owner (never the owner: one
        # cannot link oneself), or to nobody.
        "linked": st.sampled_from([None, 1, 2, 3, 4, 5]),
    }
)
memory_spec = st.fixed_dictionaries(
    {
        "owner": st.integers(0, 2),
        "words": st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=3),
        "vector_seed": st.none() | st.integers(0, 10_000),
        # Index 0 of an owner's people is their Self.
        "participants": st.lists(
            st.tuples(st.integers(0, 7), st.sampled_from(ROLES)), max_size=3, unique_by=lambda pair: pair[0]
        ),
        # Who told it: one of the owner's other people (never Self).
        "source": st.none() | st.integers(0, 7),
        "sensitivity": st.sampled_from(SENSITIVITIES),
        "expiry": st.sampled_from([None, None, "past", "future"]),
        "superseded_by": st.none() | st.integers(0, 9),
        "days_ago": st.integers(0, 400),
        # Into which circles (by index), written as a row or through the sharing service.
        "shares": st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["row", "service"])), max_size=2),
    }
)
circle_spec = st.fixed_dictionaries(
    {"owner": st.integers(0, 5), "members": st.lists(st.integers(0, 5), min_size=1, max_size=5, unique=True)}
)
change_spec = st.one_of(
    st.tuples(st.just("consent"), st.integers(0, 11), AUDIENCES, st.sampled_from(STATUSES)),
    st.tuples(st.just("remove"), st.integers(0, 2), st.integers(0, 5), st.sampled_from(["service", "row"])),
    st.tuples(st.just("add"), st.integers(0, 2), st.integers(0, 5)),
    st.tuples(st.just("share"), st.integers(0, 9), st.integers(0, 2)),
    st.tuples(st.just("unshare"), st.integers(0, 9), st.integers(0, 2)),
    st.tuples(st.just("link"), st.integers(0, 11), st.sampled_from([None, 1, 2, 3, 4, 5])),
    st.tuples(st.just("delete_circle"), st.integers(0, 2)),
)
world_spec = st.fixed_dictionaries(
    {
        "users": st.integers(3, 6),
        "circles": st.lists(circle_spec, min_size=1, max_size=3),
        "people": st.lists(person_spec, min_size=2, max_size=8),
        # Self rows that say "revoked" for every circle, written behind the service's
        # back: Self counts as granted whatever is recorded.
        "self_rows_revoked": st.booleans(),
        "memories": st.lists(memory_spec, min_size=1, max_size=8),
        "stories": st.lists(
            st.fixed_dictionaries(
                {
                    "circle": st.integers(0, 2),
                    "sensitivity": st.sampled_from(["personal", "sensitive"]),
                    "granted": st.sampled_from([True, True, False]),
                    "words": st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=2),
                }
            ),
            max_size=2,
        ),
        "changes": st.lists(change_spec, min_size=1, max_size=3),
        "viewer_sets": st.lists(
            st.lists(st.integers(0, 5), min_size=2, max_size=3, unique=True), min_size=1, max_size=3
        ),
        "query": st.fixed_dictionaries(
            {
                "words": st.lists(st.sampled_from([*VOCABULARY, "zebra"]), min_size=1, max_size=2),
                # Always given: with none, search would embed the words with the real model.
                "vector_seed": st.integers(0, 10_000),
                "limit": st.integers(1, 12),
            }
        ),
    }
)


class _Rollback(Exception):
    pass


def unit_vector(seed: int) -> tuple[float, ...]:
    vector = np.random.default_rng(seed).standard_normal(EMBEDDING_DIMENSIONS)
    return tuple(float(value) for value in vector / np.linalg.norm(vector))


def circle_audience_of(circle_id: str) -> str:
    # The oracle's own spelling of an audience, not production's.
    return OracleCircle(id=circle_id, owner="").audience


class CircleWorld:
    """The world in the database and in the oracle, changed identically."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.now = timezone.now()
        self.oracle = OracleWorld()
        self.users = [UserFactory() for _ in range(spec["users"])]
        self.user_by_id = {str(user.pk): user for user in self.users}
        self.circles: list[Circle | None] = []
        self.people: list[Person] = []
        self.memories: list[Memory] = []
        self.memory_by_id: dict[str, Memory] = {}
        self.deleted_circle_ids: list[uuid.UUID] = []
        self._apis: dict[int, ApiClient] = {}
        self._build()

    # --- helpers ---------------------------------------------------------------------

    def user(self, index: int):
        return self.users[index % len(self.users)]

    def linkable(self, owner, offset: int):
        """The user `offset` places after `owner`; None when that comes round to the owner."""
        position = (self.users.index(owner) + offset) % len(self.users)
        return None if self.users[position] == owner else self.users[position]

    def circle(self, index: int) -> Circle | None:
        return self.circles[index % len(self.circles)]

    def audience(self, audience_spec) -> str | None:
        """ "agents", or the audience of a live circle; None for a deleted circle."""
        if audience_spec == AGENTS:
            return AGENTS
        circle = self.circle(audience_spec)
        return None if circle is None else circle_audience_of(str(circle.pk))

    def api(self, user) -> ApiClient:
        """The user's API client with an owner token (made once)."""
        if user.pk not in self._apis:
            _, token = access_token_create(owner=user, kind=TokenKind.OWNER)
            self._apis[user.pk] = ApiClient(Client(), token)
        return self._apis[user.pk]

    def oracle_person(self, person: Person) -> OraclePerson:
        return self.oracle.people[str(person.pk)]

    # --- building ---------------------------------------------------------------------

    def _build(self) -> None:
        spec = self.spec
        for user in self.users:
            own = Person.objects.get(owner=user, is_self=True)
            self.people.append(own)
            self.oracle.people[str(own.pk)] = OraclePerson(
                id=str(own.pk),
                owner=str(user.pk),
                consent_status=own.consent_status,
                is_self=True,
                consents={AGENTS: own.consent_status},
                linked_user=str(user.pk),
            )
        for item in spec["circles"]:
            owner = self.user(item["owner"])
            circle = circle_create(owner=owner, name=f"C{len(self.circles)}")
            members = {str(owner.pk)}
            for index in item["members"]:
                member = self.user(index)
                if str(member.pk) not in members:
                    CircleMembership.objects.create(circle=circle, user=member, role=MembershipRole.MEMBER)
                    members.add(str(member.pk))
            self.circles.append(circle)
            self.oracle.circles[str(circle.pk)] = OracleCircle(
                id=str(circle.pk), owner=str(owner.pk), members=members
            )
        for index, item in enumerate(spec["people"]):
            owner = self.user(item["owner"])
            linked = None if item["linked"] is None else self.linkable(owner, item["linked"])
            agents_status = item["consents"][AGENTS]
            person = Person.objects.create(
                owner=owner, display_name=f"P{index}", consent_status=agents_status, linked_user=linked
            )
            consents = {AGENTS: agents_status}
            for audience_spec, status in item["consents"].items():
                audience = self.audience(audience_spec)
                if audience == AGENTS or audience is None or status is None:
                    continue  # the agents' row is the trigger's mirror of consent_status
                PersonConsent.objects.update_or_create(
                    person=person, audience=audience, defaults={"status": status}
                )
                consents[audience] = status
            self.people.append(person)
            self.oracle.people[str(person.pk)] = OraclePerson(
                id=str(person.pk),
                owner=str(owner.pk),
                consent_status=agents_status,
                consents=consents,
                linked_user=None if linked is None else str(linked.pk),
            )
        if spec["self_rows_revoked"]:
            for own in self.people[: len(self.users)]:
                for circle in self.circles:
                    PersonConsent.objects.create(person=own, audience=circle.audience, status="revoked")
        for item in spec["memories"]:
            self._add_memory(item)
        for memory, item in zip(self.memories, spec["memories"], strict=True):
            if item["superseded_by"] is None:
                continue
            newer = self.memories[item["superseded_by"] % len(self.memories)]
            if newer.pk != memory.pk and newer.owner_id == memory.owner_id:
                Memory.objects.filter(pk=memory.pk).update(superseded_by=newer)
                self.oracle.memories[str(memory.pk)].superseded_by = str(newer.pk)
        for memory, item in zip(self.memories, spec["memories"], strict=True):
            for circle_index, how in item["shares"]:
                self._add_share(memory, self.circle(circle_index), how)
        for story in spec["stories"]:
            self._add_story(story)

    def _add_story(self, story: dict) -> None:
        """A member writes about someone linked to another member, and shares it: the
        case the sensitivity rules are about, too rare to leave to chance."""
        circle = self.circle(story["circle"])
        members = sorted(self.oracle.circles[str(circle.pk)].members)
        if len(members) < 2:
            return
        owner, linked = self.user_by_id[members[0]], self.user_by_id[members[1]]
        person = Person.objects.create(owner=owner, display_name=f"S{len(self.people)}", linked_user=linked)
        status = "granted" if story["granted"] else "revoked"
        PersonConsent.objects.create(person=person, audience=circle.audience, status=status)
        self.people.append(person)
        self.oracle.people[str(person.pk)] = OraclePerson(
            id=str(person.pk),
            owner=str(owner.pk),
            consent_status=person.consent_status,
            consents={AGENTS: person.consent_status, circle_audience_of(str(circle.pk)): status},
            linked_user=str(linked.pk),
        )
        mine = [someone for someone in self.people if someone.owner_id == owner.pk]
        self._add_memory(
            {
                "owner": self.users.index(owner),
                "words": story["words"],
                "vector_seed": None,
                "participants": [(mine.index(person), "subject")],
                "source": None,
                "sensitivity": story["sensitivity"],
                "expiry": None,
                "superseded_by": None,
                "days_ago": 0,
            }
        )
        self._add_share(self.memories[-1], circle, "row")

    def _add_share(self, memory: Memory, circle: Circle, how: str) -> None:
        if how == "row":
            # A share that predates a revocation or a departure: the gate must still judge it.
            MemoryShare.objects.get_or_create(
                memory=memory, circle=circle, defaults={"shared_by": memory.owner}
            )
            self.oracle.shares.add((str(memory.pk), str(circle.pk)))
        else:
            self.share(memory, circle)

    def _add_memory(self, item: dict) -> None:
        owner = self.user(item["owner"])
        mine = [person for person in self.people if person.owner_id == owner.pk]  # Self first
        vector = None if item["vector_seed"] is None else unit_vector(item["vector_seed"])
        expires_at = {
            None: None,
            "past": self.now - timedelta(hours=1),
            "future": self.now + timedelta(days=3),
        }[item["expiry"]]
        others = mine[1:]
        source = None if item["source"] is None or not others else others[item["source"] % len(others)]
        memory = Memory.objects.create(
            id=uuid.uuid4(),
            owner=owner,
            body=" ".join(item["words"]),
            kind="event",
            sensitivity=item["sensitivity"],
            occurred_at=self.now - timedelta(days=item["days_ago"]),
            embedding=None if vector is None else list(vector),
            expires_at=expires_at,
            source_person=source,
        )
        participants: dict[str, str] = {}
        for position, role in item["participants"]:
            person = mine[position % len(mine)]
            if str(person.pk) not in participants:
                MemoryParticipant.objects.create(memory=memory, person=person, role=role)
                participants[str(person.pk)] = role
        self.memories.append(memory)
        self.memory_by_id[str(memory.pk)] = memory
        self.oracle.memories[str(memory.pk)] = OracleMemory(
            id=str(memory.pk),
            owner=str(owner.pk),
            words=list(item["words"]),
            kind="event",
            occurred_at=memory.occurred_at,
            embedding=vector,
            participants=participants,
            source_person=None if source is None else str(source.pk),
            expires_at=expires_at,
            sensitivity=item["sensitivity"],
        )

    # --- changes -------------------------------------------------------------------------

    def share(self, memory: Memory, circle: Circle) -> None:
        """Share through the service; it must refuse exactly when the oracle says so."""
        oracle_memory = self.oracle.memories[str(memory.pk)]
        oracle_circle = self.oracle.circles[str(circle.pk)]
        if oracle_memory.owner not in oracle_circle.members:
            with pytest.raises(PermissionDenied):
                memory_share(memory=memory, circle=circle, by=memory.owner)
            return
        blockers = self.oracle.circle_blockers(oracle_memory, oracle_circle)
        if blockers:
            with pytest.raises(ShareRefused) as refused:
                memory_share(memory=memory, circle=circle, by=memory.owner)
            named = {str(item.person.pk): item.status for item in refused.value.not_consented}
            assert named == {
                person_id: self.oracle.people[person_id].status_for(oracle_circle.audience)
                for person_id in blockers
            }
            return
        memory_share(memory=memory, circle=circle, by=memory.owner)
        self.oracle.shares.add((str(memory.pk), str(circle.pk)))

    def apply(self, change: tuple) -> None:
        kind = change[0]
        if kind == "consent":
            _, person_index, audience_spec, status = change
            person = self.people[person_index % len(self.people)]
            audience = self.audience(audience_spec)
            if audience is None:
                return
            oracle_person = self.oracle_person(person)
            if person.is_self and audience != AGENTS:
                with pytest.raises(ValidationError):
                    person_set_consent(person=person, status=status, actor=person.owner, audience=audience)
                return
            actor, actor_kind = person.owner, "owner"
            linked = oracle_person.linked_user
            if linked is not None and linked != oracle_person.owner:
                # A linked person decides their own consent; their journal's owner may
                # revoke or reset it, never grant it.
                if status == "granted":
                    with pytest.raises(PermissionDenied):
                        person_set_consent(person=person, status=status, actor=actor, audience=audience)
                if status == "granted" or person_index % 2:
                    actor, actor_kind = self.user_by_id[linked], "self"
            person_set_consent(
                person=person, status=status, actor=actor, actor_kind=actor_kind, audience=audience
            )
            oracle_person.consents[audience] = status
            if audience == AGENTS:
                oracle_person.consent_status = status
        elif kind == "remove":
            _, circle_index, user_index, how = change
            circle, user = self.circle(circle_index), self.user(user_index)
            if circle is None:
                return
            oracle_circle = self.oracle.circles[str(circle.pk)]
            if how == "row":
                # Behind the service's back (the owner's row too): their shares stay, and
                # the gate alone must hide them.
                CircleMembership.objects.filter(circle=circle, user=user).delete()
                oracle_circle.members.discard(str(user.pk))
                return
            by = user if user.pk % 2 else circle.owner  # leaving, or being removed
            if user.pk == circle.owner_id or str(user.pk) not in oracle_circle.members:
                with pytest.raises(ValidationError):
                    membership_remove(circle=circle, user_id=user.pk, by=by)
                return
            membership_remove(circle=circle, user_id=user.pk, by=by)
            oracle_circle.members.discard(str(user.pk))
            # What they had shared into it is unshared (only members share into a circle).
            self.oracle.shares = {
                (memory_id, circle_id)
                for memory_id, circle_id in self.oracle.shares
                if circle_id != oracle_circle.id or self.oracle.memories[memory_id].owner != str(user.pk)
            }
        elif kind == "add":
            _, circle_index, user_index = change
            circle, user = self.circle(circle_index), self.user(user_index)
            if circle is None:
                return
            role = MembershipRole.OWNER if user.pk == circle.owner_id else MembershipRole.MEMBER
            CircleMembership.objects.get_or_create(circle=circle, user=user, defaults={"role": role})
            self.oracle.circles[str(circle.pk)].members.add(str(user.pk))
        elif kind in ("share", "unshare"):
            _, memory_index, circle_index = change
            memory, circle = self.memories[memory_index % len(self.memories)], self.circle(circle_index)
            if circle is None:
                return
            if kind == "share":
                self.share(memory, circle)
            else:
                memory_unshare(memory=memory, circle=circle, by=memory.owner)
                self.oracle.shares.discard((str(memory.pk), str(circle.pk)))
        elif kind == "link":
            _, person_index, user_index = change
            person = self.people[person_index % len(self.people)]
            if person.is_self:
                return
            linked = None if user_index is None else self.linkable(person.owner, user_index)
            Person.objects.filter(pk=person.pk).update(linked_user=linked)
            person.linked_user = linked
            self.oracle_person(person).linked_user = None if linked is None else str(linked.pk)
        elif kind == "delete_circle":
            circle_index = change[1] % len(self.circles)
            circle = self.circles[circle_index]
            if circle is None:
                return
            circle_id = circle.pk  # delete() clears the instance's pk
            circle_delete(circle=circle, by=circle.owner)
            self.circles[circle_index] = None
            del self.oracle.circles[str(circle_id)]
            self.oracle.shares = {pair for pair in self.oracle.shares if pair[1] != str(circle_id)}
            self.deleted_circle_ids.append(circle_id)


def _ids(queryset) -> set[str]:
    return {str(memory_id) for memory_id in queryset.values_list("pk", flat=True)}


def _rotation(items: list, number: int, count: int) -> list:
    """`count` of the items, a different few for each step number."""
    return [items[(number + offset) % len(items)] for offset in range(min(count, len(items)))]


def check_surfaces(world: CircleWorld, step: str, *, full: bool, number: int = 0) -> None:
    """Every circle surface against the oracle.

    The gate is asked at every step for every circle, every single viewer (members
    or not) and every viewer set. The slower surfaces are sampled to keep examples
    quick: the timeline for every member, search for two members per circle (a
    different two at each step), and the privacy audit of two shared memories; on
    `full` steps (the world as built and after the last change) search for three
    members, one non-member per circle and every viewer set, the timeline for that
    non-member too, and the audit of four shared memories.
    """
    oracle = world.oracle
    query = world.spec["query"]
    words = query["words"]
    embedding = unit_vector(query["vector_seed"])
    for circle in world.circles:
        if circle is None:
            continue
        circle_id = str(circle.pk)
        members = sorted(oracle.circles[circle_id].members)
        outsider = min(set(world.user_by_id) - set(members), default=None)
        searched = set(_rotation(members, number, 3 if full else 2)) | ({outsider} if full else set())
        viewer_sets = [[user] for user in world.users] + [
            [world.user(index) for index in indexes] for indexes in world.spec["viewer_sets"]
        ]
        # And sets where each viewer alone may see some memory: there the intersection
        # rule (never sensitive for several) is what decides.
        # Sensitive memories first: a set of several must never see one.
        rank = {"sensitive": 0, "personal": 1, "public": 2}
        for memory_id in sorted(
            (memory_id for memory_id, shared in oracle.shares if shared == circle_id),
            key=lambda memory_id: (rank.get(oracle.memories[memory_id].sensitivity, 3), memory_id),
        ):
            each_sees = [
                user_id
                for user_id in members
                if oracle.circle_may_see(
                    oracle.memories[memory_id], oracle.circles[circle_id], user_id, alone=True
                )
            ]
            if (
                len(each_sees) > 1
                and len(viewer_sets) < len(world.users) + len(world.spec["viewer_sets"]) + 2
            ):
                viewer_sets.append([world.user_by_id[user_id] for user_id in each_sees])
        for viewers in viewer_sets:
            viewer_ids = [str(user.pk) for user in viewers]
            expected = oracle.circle_visible(circle_id, viewer_ids)
            where = f"{step}: circle {circle.name}, viewers {viewer_ids}"
            assert _ids(circle_visible_memories(circle.pk, [user.pk for user in viewers])) == expected, where
            # Every agent variant of the gate: an agent reading for these viewers (A2A, the
            # circle's agent in a private or the shared conversation), cleared or not for
            # sensitive memories. No agent is the owner.
            for read_by_several in (False, True):
                for cleared in (False, True):
                    agent_expected = oracle.circle_agent_visible(
                        circle_id,
                        viewer_ids,
                        read_by_several=read_by_several,
                        now=world.now,
                        may_read_sensitive=cleared,
                    )
                    agent_scope = circle_visible_memories(
                        circle.pk,
                        [user.pk for user in viewers],
                        for_agent=True,
                        read_by_several=read_by_several,
                        may_read_sensitive=cleared,
                    )
                    assert _ids(agent_scope) == agent_expected, (
                        f"{where}: for an agent, read by several {read_by_several}, cleared {cleared}"
                    )

            alone = len(viewers) == 1
            if alone and (viewer_ids[0] in members or (full and viewer_ids[0] == outsider)):
                timeline = list(circle_timeline(circle=circle, viewer=viewers[0]))
                assert {str(memory.pk) for memory in timeline} == expected, where
                dates = [memory.occurred_at for memory in timeline]
                assert dates == sorted(dates, reverse=True), where
            if not (viewer_ids[0] in searched if alone else full):
                continue
            # Search, with a random limit: never outside the gate; as many as asked;
            # exactly the text and vector matches when the limit covers them.
            allowed = {memory_id: oracle.memories[memory_id] for memory_id in expected}
            findable = oracle.text_matches(allowed, words) | {
                memory_id for memory_id, _ in oracle.nearest(allowed, embedding)
            }
            hits = circle_memory_search(
                circle.pk,
                [user.pk for user in viewers],
                " ".join(words),
                limit=query["limit"],
                query_embedding=embedding,
                # Random vectors are all far apart: the gate is checked without the relevance cut-off.
                relevance=retrieval.NO_CUTOFF,
            )
            returned = [str(hit.memory.pk) for hit in hits]
            assert len(returned) == len(set(returned)), where
            assert set(returned) <= findable, where
            assert len(returned) == min(query["limit"], len(findable)), where
            # The same search by an agent for these viewers (a single viewer: A2A or a private
            # conversation; several: the shared one), cleared for sensitive memories every other step.
            cleared = bool(number % 2)
            agent_allowed = oracle.circle_agent_visible(
                circle_id, viewer_ids, read_by_several=not alone, now=world.now, may_read_sensitive=cleared
            )
            allowed = {memory_id: oracle.memories[memory_id] for memory_id in agent_allowed}
            findable = oracle.text_matches(allowed, words) | {
                memory_id for memory_id, _ in oracle.nearest(allowed, embedding)
            }
            hits = circle_memory_search(
                circle.pk,
                [user.pk for user in viewers],
                " ".join(words),
                limit=query["limit"],
                query_embedding=embedding,
                for_agent=True,
                read_by_several=not alone,
                may_read_sensitive=cleared,
                relevance=retrieval.NO_CUTOFF,
            )
            returned = [str(hit.memory.pk) for hit in hits]
            assert set(returned) <= findable, f"{where}: agent search"
            assert len(returned) == min(query["limit"], len(findable)), f"{where}: agent search"

    for circle_id in world.deleted_circle_ids:
        for user in world.users:
            assert not circle_visible_memories(circle_id, [user.pk]).exists(), step

    # The privacy audit, member by member, of memories shared somewhere.
    shared = _rotation(sorted({memory_id for memory_id, _ in oracle.shares}), number, 4 if full else 2)
    for memory_id in shared:
        shared_into = {circle_id for shared_id, circle_id in oracle.shares if shared_id == memory_id}
        audit = memory_privacy_audit(memory=world.memory_by_id[memory_id])
        assert {str(entry.circle.pk) for entry in audit.circles} == shared_into, step
        for entry in audit.circles:
            circle_id = str(entry.circle.pk)
            members = {str(member.user.pk): member.visible for member in entry.members}
            assert set(members) == oracle.circles[circle_id].members, step
            for user_id, visible in members.items():
                expected = memory_id in oracle.circle_visible(circle_id, [user_id])
                assert visible == expected, f"{step}: audit of {memory_id} in {circle_id} for {user_id}"


def check_api(world: CircleWorld, step: str) -> None:
    """GET /api/v1/circles/{id}/memories/ (timeline and ?q= search) and .../{memory_id}/,
    each user with their own owner token, against the oracle. Non-members: 404."""
    oracle = world.oracle
    query = world.spec["query"]
    embedding = unit_vector(query["vector_seed"])
    usernames = {str(user.pk): user.get_username() for user in world.users}
    # The API embeds ?q= itself: the model is replaced by the fixed query vector.
    with mock.patch("memories.embeddings.embed_text", return_value=list(embedding)):
        for user in world.users:
            api = world.api(user)
            user_id = str(user.pk)
            for circle_id in world.deleted_circle_ids:
                assert api.get(f"/api/v1/circles/{circle_id}/memories/").status_code == 404, step
            for circle in world.circles:
                if circle is None:
                    continue
                circle_id = str(circle.pk)
                where = f"{step}: API, circle {circle.name}, viewer {user_id}"
                url = f"/api/v1/circles/{circle_id}/memories/"
                shared = sorted(
                    memory_id for memory_id, shared_into in oracle.shares if shared_into == circle_id
                )
                unshared = sorted(set(oracle.memories) - set(shared))[:1]
                if user_id not in oracle.circles[circle_id].members:
                    assert api.get(url).status_code == 404, where
                    for memory_id in (shared + unshared)[:1]:
                        assert api.get(f"{url}{memory_id}/").status_code == 404, where
                    continue
                expected = oracle.circle_visible(circle_id, [user_id])
                listed = api.get(url, {"limit": retrieval.MAX_LIMIT})
                assert listed.status_code == 200, where
                body = listed.json()
                assert {row["id"] for row in body["results"]} == expected, where
                assert body["count"] == len(expected), where
                for row in body["results"]:
                    assert row["owner"] == usernames[oracle.memories[row["id"]].owner], where

                allowed = {memory_id: oracle.memories[memory_id] for memory_id in expected}
                findable = oracle.text_matches(allowed, query["words"]) | {
                    memory_id for memory_id, _ in oracle.nearest(allowed, embedding)
                }
                # Meaning alone always relevant (any similarity): the gate without the cut-off.
                with override_settings(RELEVANCE_MIN_SIMILARITY=-1.0):
                    found = api.get(url, {"q": " ".join(query["words"]), "limit": retrieval.MAX_LIMIT})
                assert found.status_code == 200, where
                assert {row["id"] for row in found.json()["results"]} == findable, where

                for memory_id in shared[:2] + unshared:
                    detail = api.get(f"{url}{memory_id}/")
                    assert detail.status_code == (200 if memory_id in expected else 404), (
                        f"{where}: {memory_id}"
                    )
                    if detail.status_code == 200:
                        assert detail.json()["id"] == memory_id, where


def check_a2a(world: CircleWorld, step: str, *, mcp: bool = True) -> None:
    """Each member's own agent reading each circle (A2A on) through the API (list, ?q=, detail)
    and the MCP tools (search_memories, timeline_window with `circle`), against the oracle's
    agent policy for that member alone: no owner's shortcut, expired and replaced memories out,
    sensitive ones only with the agent's clearance (given to every other user's agent)."""
    from agents.mcpserver import tools
    from agents.models import Agent

    oracle = world.oracle
    query = world.spec["query"]
    embedding = unit_vector(query["vector_seed"])
    for circle in world.circles:
        if circle is not None:
            Circle.objects.filter(pk=circle.pk).update(agents_may_read=True)
    with (
        mock.patch("memories.embeddings.embed_text", return_value=list(embedding)),
        override_settings(RELEVANCE_MIN_SIMILARITY=-1.0),
    ):
        for number, user in enumerate(world.users):
            cleared = bool(number % 2)
            agent = Agent.objects.create(owner=user, name=f"A2A reader {step}", may_read_sensitive=cleared)
            token, raw = access_token_create(owner=user, kind=TokenKind.AGENT, agent=agent)
            api = ApiClient(Client(), raw)
            user_id = str(user.pk)
            for circle in world.circles:
                if circle is None:
                    continue
                circle_id = str(circle.pk)
                where = f"{step}: A2A, circle {circle.name}, agent of {user_id}, cleared {cleared}"
                url = f"/api/v1/circles/{circle_id}/memories/"
                if user_id not in oracle.circles[circle_id].members:
                    assert api.get(url).status_code == 404, where
                    continue
                expected = oracle.circle_agent_visible(
                    circle_id, [user_id], read_by_several=False, now=world.now, may_read_sensitive=cleared
                )
                listed = api.get(url, {"limit": retrieval.MAX_LIMIT})
                assert listed.status_code == 200, where
                assert {row["id"] for row in listed.json()["results"]} == expected, where
                allowed = {memory_id: oracle.memories[memory_id] for memory_id in expected}
                findable = oracle.text_matches(allowed, query["words"]) | {
                    memory_id for memory_id, _ in oracle.nearest(allowed, embedding)
                }
                found = api.get(url, {"q": " ".join(query["words"]), "limit": retrieval.MAX_LIMIT})
                assert {row["id"] for row in found.json()["results"]} == findable, where
                shared = sorted(memory_id for memory_id, into in oracle.shares if into == circle_id)
                for memory_id in shared[:3]:
                    status = api.get(f"{url}{memory_id}/").status_code
                    assert status == (200 if memory_id in expected else 404), f"{where}: {memory_id}"
                if not mcp:
                    continue
                searched = tools.search_memories(
                    token=token, query=" ".join(query["words"]), limit=retrieval.MAX_LIMIT, circle=circle_id
                )
                assert {row["id"] for row in searched["results"]} == findable, f"{where}: MCP search"
                window = tools.timeline_window(
                    token=token,
                    start="1990-01-01",
                    end=(world.now + timedelta(days=1)).date().isoformat(),
                    limit=retrieval.MAX_LIMIT,
                    circle=circle_id,
                )
                assert {row["id"] for row in window["memories"]} == expected, f"{where}: MCP timeline"


def check_world(spec: dict, *, mcp: bool = True) -> None:
    world = CircleWorld(spec)
    # The oracle's shares and the database's agree before anything is compared.
    assert {
        (str(memory_id), str(circle_id))
        for memory_id, circle_id in MemoryShare.objects.values_list("memory_id", "circle_id")
    } == world.oracle.shares
    check_surfaces(world, "built", full=True)
    for number, change in enumerate(spec["changes"]):
        world.apply(change)
        last = number == len(spec["changes"]) - 1
        check_surfaces(world, f"after change {number} {change}", full=last, number=number + 1)
    # Through the API, after the changes: each applies to the very next request.
    check_api(world, "after the changes")
    check_a2a(world, "after the changes", mcp=mcp)


def vector_path(path: str) -> contextlib.AbstractContextManager:
    """Circle search's two vector paths: exact among the shares the maintained count
    calls open, or the open shares' HNSW index with the gate inside the scan (and no
    exact pass to fill a short answer)."""
    if path == "exact":
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(mock.patch.object(search_settings, "CIRCLE_EXACT_CANDIDATES_MAX", 0))
    stack.enter_context(mock.patch.object(search_settings, "EXACT_FALLBACK_MAX_MEMORIES", 0))
    # Dead index entries of earlier tests and examples must not end the scan (tests/index_scans.py).
    stack.enter_context(unbounded_index_scans())
    return stack


@pytest.mark.longest
@privacy_settings
@given(spec=world_spec, path=st.sampled_from(["exact", "index"]))
def test_circle_surfaces_agree_with_the_reference_policy(spec, path):
    # One savepoint per example, rolled back: every example starts from an empty world.
    try:
        with vector_path(path), transaction.atomic():
            check_world(spec)
            raise _Rollback
    except _Rollback:
        pass


@pytest.mark.longest
@pytest.mark.django_db(transaction=True)
@privacy_settings
@given(spec=world_spec)
def test_circle_surfaces_with_the_full_text_side_on_the_search_helper_agree_with_the_reference_policy(
    text_side_threads, spec
):
    """The same checks with each circle search's full-text side on the search helper's own connection.

    The helper (memories.search.statements._SideRunner) reads only what is committed: each world is
    committed, checked (its changes committed one by one) and deleted.
    """
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from portability.services import account_delete

    text_side_threads.clear()
    try:
        with override_settings(SEARCH_SIDES_IN_PARALLEL=True):
            # The MCP tools search inside their own transaction, where the full-text side
            # stays on the caller's thread: they are checked by the test above.
            check_world(spec, mcp=False)
    finally:
        for circle in Circle.objects.all():
            circle.delete()
        for user in get_user_model().objects.all():
            account_delete(user=user, password="correct horse battery")  # UserFactory's
    assert text_side_threads
    assert all(name.startswith("keepsake-search-side") for name in text_side_threads), text_side_threads
