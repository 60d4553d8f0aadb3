"""An independent reference implementation of Keepsake's consent policy, in plain Python.

It knows nothing of Django, SQL or the production retrieval module: it works on a
small in-memory description of a world (owners, people, memories) and answers
"what may an agent see, and what should a search return". The property tests
build the same world in the database and compare the production selectors with
these answers. Keep it small and obviously right; never import production code.

Policy for agents (SPEC §3, §5):
- An agent may see a memory only if every participant's consent is `granted`
  (a memory with no participants: the owner's Self person's, and none when the
  owner has no Self),
  the source person (who told the owner), if any, has granted consent, the memory
  has not expired (`expires_at` is None or after now) and has not been superseded.
- `sensitive` memories only reach an agent the owner cleared for them (SPEC §3:
  "may read sensitive memories", off by default).
- The owner sees all of their own memories. Nobody sees another owner's memories.
- No agent is the owner (SPEC §3): the owner's shortcut is for the human owner.

Policy for circles (SPEC §4): a viewer V sees memory M of owner O in circle C iff
M is shared into C, O and V are current members of C, and either V is O, or
- every participant and the source of M is granted for the audience `circle:<C>`
  (consent is per audience, no answer means pending; a Self person counts as
  granted, whatever is recorded for it), and
- M's sensitivity allows V: `public` yes; `personal` only if V is the linked user
  of a participant whose role is `subject`; `sensitive` the same, and only when V
  reads alone.
A set of viewers sees what every one of them may see, where nobody reads alone
when the set has more than one viewer. Expiry and supersession do not hide
anything from members.

Policy for files of a memory (SPEC §4 "Files (photos)"): a photo is served to the
memory's owner, or to a person who, reading alone, may see the memory in some circle it
is shared into; to nobody once the memory is deleted; never to an agent.

Policy for a circle's agent (SPEC §4 "Several viewers", "Agent-to-agent"): what the
circle's viewer-set rule allows, where the shared chat counts as read by several
(never alone, whatever its size) and a private chat or a member's agent as that
member alone, minus expired and superseded memories (as for the owner's agents).
An agent reading for the memory's owner (their own agent through the circle, the
circle's agent in a conversation the owner reads) gets no owner's shortcut: the
memory must pass the owner's agents' policy above *and* the circle's consent, and
a `sensitive` one also needs the agent's clearance and a reply read alone.

Policy for e-mail (issue #39): a message to a user carries the text of that user's own
memories only, and a person's name (as a journal names them) only to that journal's
owner or to the person themself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

GRANTED = "granted"
PENDING = "pending"
SUBJECT = "subject"
CIRCLE_AUDIENCE_PREFIX = "circle:"


@dataclass
class OraclePerson:
    id: str
    owner: str
    consent_status: str
    is_self: bool = False
    # Per audience ("agents" or "circle:<id>") → status; an audience not listed is pending.
    # The agents' gate reads consent_status (the `agents` audience).
    consents: dict[str, str] = field(default_factory=dict)
    linked_user: str | None = None

    def status_for(self, audience: str) -> str:
        return self.consents.get(audience, PENDING)


@dataclass
class OracleMemory:
    id: str
    owner: str
    words: list[str]
    kind: str
    occurred_at: datetime
    embedding: tuple[float, ...] | None = None
    participants: dict[str, str] = field(default_factory=dict)  # person id -> role
    source_person: str | None = None
    expires_at: datetime | None = None
    superseded_by: str | None = None
    sensitivity: str = "personal"


@dataclass
class OracleCircle:
    id: str
    owner: str
    members: set[str] = field(default_factory=set)  # user ids, the owner among them

    @property
    def audience(self) -> str:
        return f"{CIRCLE_AUDIENCE_PREFIX}{self.id}"


@dataclass
class OracleEdge:
    source: str
    target: str
    kind: str
    weight: float


@dataclass
class OracleWorld:
    people: dict[str, OraclePerson] = field(default_factory=dict)
    memories: dict[str, OracleMemory] = field(default_factory=dict)
    edges: list[OracleEdge] = field(default_factory=list)
    circles: dict[str, OracleCircle] = field(default_factory=dict)
    shares: set[tuple[str, str]] = field(default_factory=set)  # (memory id, circle id)

    # --- the policy -------------------------------------------------------------

    def owner_self(self, owner: str) -> OraclePerson | None:
        return next((p for p in self.people.values() if p.owner == owner and p.is_self), None)

    def agent_may_see(self, memory: OracleMemory, *, now: datetime, may_read_sensitive: bool = False) -> bool:
        # A memory with nobody in it is the owner's own: Self stands in as its
        # participant (no Self at all: hidden, fail closed).
        if memory.participants:
            participants = [self.people[person_id] for person_id in memory.participants]
        else:
            participants = [self.owner_self(memory.owner)]
        everyone_consented = all(
            person is not None and person.consent_status == GRANTED for person in participants
        )
        source_consented = (
            memory.source_person is None or self.people[memory.source_person].consent_status == GRANTED
        )
        cleared = memory.sensitivity != "sensitive" or may_read_sensitive
        return everyone_consented and source_consented and cleared and self.alive_for_agents(memory, now=now)

    @staticmethod
    def alive_for_agents(memory: OracleMemory, *, now: datetime) -> bool:
        """Not expired and not superseded: what agents may still use (the owner and members keep the rest)."""
        return (memory.expires_at is None or memory.expires_at > now) and memory.superseded_by is None

    def visible(
        self,
        owner: str,
        *,
        respect_consent: bool,
        now: datetime,
        person: str | None = None,
        kind: str | None = None,
        may_read_sensitive: bool = False,
    ) -> dict[str, OracleMemory]:
        return {
            memory.id: memory
            for memory in self.memories.values()
            if memory.owner == owner
            and (
                not respect_consent
                or self.agent_may_see(memory, now=now, may_read_sensitive=may_read_sensitive)
            )
            and (person is None or person in memory.participants)
            and (kind is None or memory.kind == kind)
        }

    # --- circles ---------------------------------------------------------------

    def circle_blockers(self, memory: OracleMemory, circle: OracleCircle) -> set[str]:
        """The people in the memory (participants and source) not granted for the circle."""
        people = set(memory.participants)
        if memory.source_person is not None:
            people.add(memory.source_person)
        return {
            person_id
            for person_id in people
            if not self.people[person_id].is_self
            and self.people[person_id].status_for(circle.audience) != GRANTED
        }

    def about(self, memory: OracleMemory, viewer: str) -> bool:
        """Is the viewer the linked user of one of the memory's subjects?"""
        return any(
            role == SUBJECT and self.people[person_id].linked_user == viewer
            for person_id, role in memory.participants.items()
        )

    def circle_may_see(
        self,
        memory: OracleMemory,
        circle: OracleCircle,
        viewer: str,
        *,
        alone: bool,
        for_others: bool = False,
        as_agent: bool = False,
        may_read_sensitive: bool = False,
        now: datetime | None = None,
    ) -> bool:
        """`for_others`: what the viewer sees will be read by the circle (its shared chat,
        future members too): the owner's own memory then needs its people's consent for
        the circle and must not be sensitive. `as_agent`: an agent reads for the viewer
        (`now` then required): expired and superseded memories are out, a sensitive one
        needs `may_read_sensitive`, and the owner's own memory needs the owner's agents'
        policy as well as the circle's consent."""
        if (memory.id, circle.id) not in self.shares:
            return False
        if memory.owner not in circle.members or viewer not in circle.members:
            return False
        if as_agent and not self.alive_for_agents(memory, now=now):
            return False
        sensitive_allowed = alone and not for_others and (may_read_sensitive or not as_agent)
        if viewer == memory.owner:
            if as_agent:
                return (
                    self.agent_may_see(memory, now=now, may_read_sensitive=sensitive_allowed)
                    and not self.circle_blockers(memory, circle)
                    and (memory.sensitivity in ("public", "personal") or sensitive_allowed)
                    and memory.sensitivity in ("public", "personal", "sensitive")
                )
            if not for_others:
                return True
            return not self.circle_blockers(memory, circle) and memory.sensitivity in ("public", "personal")
        if self.circle_blockers(memory, circle):
            return False
        if memory.sensitivity == "public":
            return True
        if memory.sensitivity == "personal":
            return self.about(memory, viewer)
        if memory.sensitivity == "sensitive":
            return sensitive_allowed and self.about(memory, viewer)
        return False  # an unknown sensitivity shows nothing: fail closed

    def circle_visible(self, circle_id: str, viewers: Iterable[str]) -> set[str]:
        """Ids of the memories in the circle that every viewer may see (none for no viewers)."""
        viewers = set(viewers)
        circle = self.circles.get(circle_id)
        if circle is None or not viewers:
            return set()
        alone = len(viewers) == 1
        return {
            memory.id
            for memory in self.memories.values()
            if all(self.circle_may_see(memory, circle, viewer, alone=alone) for viewer in viewers)
        }

    def circle_agent_visible(
        self,
        circle_id: str,
        viewers: Iterable[str],
        *,
        read_by_several: bool,
        now: datetime,
        may_read_sensitive: bool = False,
    ) -> set[str]:
        """Ids of the memories a circle's agent may put into a reply read by `viewers`.

        The circle's shared chat is read by every current member and by whoever joins
        later (read_by_several: nobody reads alone, even a circle of one); a private
        chat, or a member's own agent reading the circle (A2A), is that one viewer
        alone. Agents never use expired or superseded memories, and never a member's
        own memory by the owner's shortcut.
        """
        viewers = set(viewers)
        circle = self.circles.get(circle_id)
        if circle is None or not viewers:
            return set()
        alone = len(viewers) == 1 and not read_by_several
        return {
            memory.id
            for memory in self.memories.values()
            if all(
                self.circle_may_see(
                    memory,
                    circle,
                    viewer,
                    alone=alone,
                    for_others=read_by_several,
                    as_agent=True,
                    may_read_sensitive=may_read_sensitive,
                    now=now,
                )
                for viewer in viewers
            )
        }

    # --- e-mail ----------------------------------------------------------------------

    def email_may_quote(self, memory_id: str, recipient: str) -> bool:
        """May an e-mail to `recipient` (a user) carry this memory's text? Only to its owner
        (issue #39): the digest is the owner's own view of their journal; every other message
        is about accounts and circles, never a memory, whoever may see it in the app."""
        memory = self.memories.get(memory_id)
        return memory is not None and memory.owner == recipient

    def email_may_name(self, person_id: str, recipient: str) -> bool:
        """May an e-mail to `recipient` carry a person's name as a journal names them? To
        that journal's owner, and to the person themself (the account linked to them);
        consenting or not, nobody else learns by e-mail who is in whose journal."""
        person = self.people.get(person_id)
        return person is not None and recipient in (person.owner, person.linked_user)

    # --- what searches should return ---------------------------------------------

    @staticmethod
    def cosine_distance(left: Iterable[float], right: Iterable[float]) -> float:
        left, right = list(left), list(right)
        dot = sum(a * b for a, b in zip(left, right, strict=True))
        norms = math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right))
        return 1.0 - dot / norms

    def nearest(
        self, candidates: dict[str, OracleMemory], embedding: Iterable[float], *, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """Every embedded candidate by exact cosine distance, nearest first."""
        query = list(embedding)
        ranked = [
            (memory.id, self.cosine_distance(memory.embedding, query))
            for memory in candidates.values()
            if memory.embedding is not None and memory.id != exclude
        ]
        return sorted(ranked, key=lambda row: (row[1], row[0]))

    @staticmethod
    def text_matches(candidates: dict[str, OracleMemory], query_words: list[str]) -> set[str]:
        """Memories containing every query word (the tests' vocabulary has no stop
        words and no two words share an English stem, so this is what full text does)."""
        return {
            memory.id
            for memory in candidates.values()
            if query_words and all(word in memory.words for word in query_words)
        }

    def shared_person(self, candidates: dict[str, OracleMemory], anchor: OracleMemory) -> dict[str, int]:
        """Candidates sharing a (non-Self) person with the anchor: how many in common."""
        anchor_people = {person_id for person_id in anchor.participants if not self.people[person_id].is_self}
        shared = {}
        for memory in candidates.values():
            if memory.id == anchor.id:
                continue
            count = len(anchor_people & set(memory.participants))
            if count:
                shared[memory.id] = count
        return shared

    def edge_neighbours(self, anchor: OracleMemory) -> set[str]:
        """The other ends of every stored edge touching the anchor, either direction."""
        return {
            edge.target if edge.source == anchor.id else edge.source
            for edge in self.edges
            if anchor.id in (edge.source, edge.target)
        }

    # --- what is made from memories ----------------------------------------------

    def reply_visible(self, source_ids: Iterable[str], circle_id: str, reader: str) -> bool:
        """May `reader` read, in the circle, a stored reply built from `source_ids`?

        SPEC §3, "What is made from a memory is gated like the memory": only if every
        source still exists and the reader, alone, may see it in the circle now (a
        member's own view: a memory's owner still sees it). A reply built from nothing
        withholds nothing. Whoever may not read it gets a placeholder instead.
        """
        circle = self.circles.get(circle_id)
        if circle is None:
            return False
        return all(
            source in self.memories and self.circle_may_see(self.memories[source], circle, reader, alone=True)
            for source in source_ids
        )

    # --- files of memories ---------------------------------------------------------

    def file_visible(self, memory_id: str, reader: str) -> bool:
        """May `reader` (a person, never an agent) receive a photo of this memory now?"""
        memory = self.memories.get(memory_id)
        if memory is None:
            return False
        if memory.owner == reader:
            return True
        return any(
            self.circle_may_see(memory, circle, reader, alone=True) for circle in self.circles.values()
        )
