"""Why the gate says what it says: the owner's badges and the privacy audit.

Beside the gate (memories/gate.py), never instead of it. Two kinds of answer live here:

- **The badges** ("Hidden from agents", "Not consented: …") on the owner's own pages:
  `memory_agent_visibility` names what keeps a memory from the owner's agents, from
  the rows already loaded for the page (no query per card). It restates rule 2 in
  Python to *explain*, so the consent property test
  (tests/memories/test_consent_property.py) compares its `hidden` with the gate's SQL
  on random worlds: a badge that disagreed with the gate would fail there.
- **The privacy audit** ("who can see this, and why": the memory's page, the API's
  /memories/{id}/audit/, the MCP tool `privacy_audit`): every yes/no is asked of the
  gate itself (`agent_visible_memories`, `circle_visible_memories` per member, alone);
  the reasons only explain the answer (tests/circles/test_circle_property.py checks
  every member's yes/no against the oracle).

Nothing here is a scope: no surface reads memories through this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser

from memories.gate import agent_visible_memories, circle_consent_blockers, circle_visible_memories
from memories.lifecycle import memory_is_expired
from memories.models import Memory, ParticipantRole, Sensitivity
from people.models import ConsentStatus, Person

# --- the owner's badges: rule 2, explained ---------------------------------------------------------


def memory_consent_blockers(memory: Memory) -> list[Person]:
    """People in the memory whose consent for agents is not granted (the owner's badge).

    Uses the prefetched participants when present.
    """
    return [
        participant.person
        for participant in memory.participants.all()
        if participant.person.consent_status != ConsentStatus.GRANTED
    ]


@dataclass(frozen=True)
class AgentVisibility:
    """Why the owner's agents cannot see a memory (rule 2 explained; the gate decides)."""

    blockers: list[Person]
    source_blocker: Person | None
    expired: bool
    superseded: bool
    # No one is in the memory and the owner's Self is not granted (or missing):
    # Self stands in as the participant of an untagged memory.
    self_withheld: bool = False
    # `sensitive`: withheld from every agent the owner has not cleared for sensitive memories
    # (the gate's default, agent_visible_memories(may_read_sensitive=False)).
    sensitive: bool = False

    @property
    def hidden(self) -> bool:
        return bool(
            self.blockers
            or self.source_blocker
            or self.expired
            or self.superseded
            or self.self_withheld
            or self.sensitive
        )


def memory_agent_visibility(memory: Memory, *, now: datetime | None = None) -> AgentVisibility:
    """Everything that keeps `memory` from agents. Uses the prefetched participants and source person."""
    blockers = memory_consent_blockers(memory)
    source = memory.source_person
    source_blocker = None
    # A source who is also a participant is already named among the blockers.
    if source is not None and source.consent_status != ConsentStatus.GRANTED and source not in blockers:
        source_blocker = source
    return AgentVisibility(
        blockers=blockers,
        source_blocker=source_blocker,
        expired=memory_is_expired(memory, now=now),
        superseded=memory.superseded_by_id is not None,
        self_withheld=not memory.participants.all() and _owner_self_status(memory) != ConsentStatus.GRANTED,
        sensitive=memory.sensitivity == Sensitivity.SENSITIVE,
    )


def _owner_self_status(memory: Memory) -> str | None:
    # memory_list / memory_get annotate it; other callers pay one small query.
    if hasattr(memory, "owner_self_status"):
        return memory.owner_self_status
    return (
        Person.objects.filter(owner_id=memory.owner_id, is_self=True)
        .values_list("consent_status", flat=True)
        .first()
    )


# --- the privacy audit: every yes/no from the gate -------------------------------------------------


@dataclass
class AuditEntry:
    """One viewer's answer: may they see the memory, and why (or why not)."""

    label: str
    visible: bool
    reasons: list[str] = field(default_factory=list)
    user: AbstractBaseUser | None = None


@dataclass
class CircleAudit:
    circle: object  # circles.models.Circle
    members: list[AuditEntry]


@dataclass
class PrivacyAudit:
    memory: Memory
    owner: AuditEntry
    agents: AuditEntry
    circles: list[CircleAudit]


def _agents_entry(memory: Memory) -> AuditEntry:
    """The owner's agents: the gate's yes/no (with and without the sensitive clearance), explained."""
    from agents.models import Agent

    visible = agent_visible_memories(memory.owner_id).filter(pk=memory.pk).exists()
    cleared: list[str] = []
    if not visible and memory.sensitivity == Sensitivity.SENSITIVE:
        # The same gate with the clearance the owner gave some agents for sensitive memories.
        if agent_visible_memories(memory.owner_id, may_read_sensitive=True).filter(pk=memory.pk).exists():
            cleared = list(
                Agent.objects.filter(owner_id=memory.owner_id, may_read_sensitive=True)
                .order_by("name")
                .values_list("name", flat=True)
            )
    if visible:
        return AuditEntry(
            label="Your agents", visible=True, reasons=["everyone in it has consented for your agents"]
        )
    why = memory_agent_visibility(memory)
    reasons = [
        f"{person.display_name} has not consented ({person.consent_status})" for person in why.blockers
    ]
    if why.source_blocker is not None:
        source = why.source_blocker
        reasons.append(f"told by {source.display_name}, who has not consented ({source.consent_status})")
    if why.self_withheld:
        reasons.append("no one else is in it and your own consent (Self) is not granted")
    if why.expired:
        reasons.append("expired")
    if why.superseded:
        reasons.append("replaced by a newer memory")
    if why.sensitive:
        reasons.append(
            "sensitive: only agents you allowed to read sensitive memories receive it"
            + (f" ({', '.join(cleared)})" if cleared else "; none is allowed")
        )
    return AuditEntry(label="Your agents", visible=bool(cleared), reasons=reasons)


def member_reasons(
    memory: Memory, circle, member: AbstractBaseUser, *, blockers: list[tuple[Person, str]] | None = None
) -> list[str]:
    """Why the gate says no for one member — explanation only; the yes/no is the gate's.

    `blockers`: circle_consent_blockers(memory, circle), when the caller has them already.
    """
    if blockers is None:
        blockers = circle_consent_blockers(memory, circle.pk)
    reasons = [
        f"{person.display_name} has not consented for {circle.name} ({status})" for person, status in blockers
    ]
    about_member = memory.participants.filter(
        role=ParticipantRole.SUBJECT, person__linked_user=member
    ).exists()
    if memory.sensitivity == Sensitivity.PERSONAL and not about_member:
        reasons.append("personal and not about them: shown only to a member it is about")
    elif memory.sensitivity == Sensitivity.SENSITIVE and not about_member:
        reasons.append("sensitive: shown only to the member it is about, alone")
    return reasons


def memory_privacy_audit(*, memory: Memory) -> PrivacyAudit:
    """Who can see this memory, and why: the owner, the owner's agents, each circle member by member.

    Every yes/no is asked of the gate itself (the same SQL every surface uses); the
    reasons only explain it.
    """
    from circles.models import CircleMembership, MemoryShare

    circles = []
    shares = MemoryShare.objects.filter(memory=memory).select_related("circle").order_by("circle__name")
    for share in shares:
        entries = []
        memberships = CircleMembership.objects.filter(circle=share.circle).select_related("user")
        for membership in memberships.order_by("-role", "joined_at"):
            member = membership.user
            visible = circle_visible_memories(share.circle_id, [member.pk]).filter(pk=memory.pk).exists()
            if member.pk == memory.owner_id:
                reasons = ["owns it"]
            elif visible:
                reasons = ["everyone in it has consented for this circle"]
            else:
                reasons = member_reasons(memory, share.circle, member) or ["not shown in this circle"]
            entries.append(
                AuditEntry(label=member.get_username(), visible=visible, reasons=reasons, user=member)
            )
        circles.append(CircleAudit(circle=share.circle, members=entries))
    return PrivacyAudit(
        memory=memory,
        owner=AuditEntry(
            label="You (the owner)", visible=True, reasons=["the owner always sees their memories"]
        ),
        agents=_agents_entry(memory),
        circles=circles,
    )
