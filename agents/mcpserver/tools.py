"""What each MCP tool does, transport-free: validate, read through the gate, log, shape.

Each function takes the caller's (already authenticated) agent token. It reads only
through the consent gate, writes one AccessLog row (surface `mcp`) per memory it hands
out, in the same transaction as the read, and returns plain JSON-ready data. Bad input
raises ToolInputError with a message meant for the agent.
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404

from accounts.models import AccessToken
from agents.mcpserver.selectors import (
    mcp_circle_timeline_window,
    mcp_people_named,
    mcp_person_memories,
    mcp_timeline_window,
    mcp_visible_memory,
)
from agents.models import AccessSurface, ProposalSurface
from agents.proposals import (
    MAX_AGENT_REASON_LENGTH,
    MAX_PROPOSAL_LENGTH,
    AgentConsentAsk,
    consent_request_from_agent,
    memory_proposal_create,
)
from agents.services import access_log_record
from attachments.selectors import photo_count, photo_counts_attach
from config.limits import text_problem
from insights.services import insight_check
from memories.gate_explain import memory_privacy_audit
from memories.models import Memory
from memories.retrieval import MAX_LIMIT, circle_memory_search, memory_search
from people.models import Person
from people.selectors import person_name_for_others

MAX_QUERY_LENGTH = 1000
MAX_INSIGHT_SOURCES = 20
MAX_NAME_LENGTH = 200
PERSON_MEMORY_LIMIT = 20
TIMELINE_DEFAULT_LIMIT = 50
# The same words for a memory that does not exist, is another owner's, or is gated out:
# an agent must not learn that a hidden memory exists.
MEMORY_NOT_FOUND = "Memory not found."
# Likewise for a person: no one by that name, or someone who has not consented (an
# agent must not learn they exist), or only part of a name.
PERSON_NOT_FOUND = (
    "No one called {name!r} is shared with agents. Use a whole name or alias; "
    "people who have not consented are never shown."
)


class ToolInputError(ValueError):
    """A tool's arguments are unusable; the message tells the agent how to fix them."""


def _check_limit(limit: int, *, name: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ToolInputError(f"{name} must be a whole number from 1 to {MAX_LIMIT}.")
    return limit


def _check_storable(value: str, *, name: str) -> None:
    # PostgreSQL cannot take NUL or an unpaired surrogate: say so, rather than crash the tool.
    problem = text_problem(value)
    if problem is not None:
        raise ToolInputError(f"{name} {problem}")


def _check_text(value: str, *, name: str, max_length: int) -> str:
    value = (value or "").strip()
    if not value:
        raise ToolInputError(f"{name} must not be empty.")
    if len(value) > max_length:
        raise ToolInputError(f"{name} is too long (at most {max_length} characters).")
    _check_storable(value, name=name)
    return value


def _parse_day(value: str, *, name: str) -> date:
    text = (value or "").strip()
    try:
        return date.fromisoformat(text)
    except ValueError:
        pass
    try:
        # Agents often send a full timestamp; its calendar day is what the window needs.
        return datetime.fromisoformat(text).date()
    except ValueError:
        raise ToolInputError(f"{name} must be an ISO date such as 2024-05-31, not {value!r}.") from None


def _memory_out(memory: Memory) -> dict[str, Any]:
    # Only gated memories reach this: every person in them has consented to the audience it is
    # read through (the owner's agents; with `circle`, that circle too), so naming them is allowed.
    return {
        "id": str(memory.pk),
        "title": memory.title,
        "text": memory.body,
        "occurred_at": memory.occurred_at.isoformat(),
        "kind": memory.kind,
        "people": [
            {"name": participant.person.display_name, "role": participant.role}
            for participant in memory.participants.all()
        ],
        "told_by": memory.source_person.display_name if memory.source_person else None,
        # How many photos, never the photos: no agent receives their bytes, address or metadata.
        "photos": photo_count(memory),
    }


def _with_photo_counts(hits: list) -> list:
    """The hits, their memories' photo counts read in one query (not one per memory)."""
    photo_counts_attach([hit.memory for hit in hits])
    return hits


def _log(token: AccessToken, memories: list[Memory]) -> None:
    access_log_record(owner=token.owner, memories=memories, surface=AccessSurface.MCP, agent=token.agent)


# The same words whether the circle does not exist, the owner is not in it, or it does
# not let members' agents read: an agent must not learn which.
CIRCLE_NOT_FOUND = "No circle {circle!r} that this agent may read."


def _readable_circle(token: AccessToken, circle: str):
    """A circle whose members' agents may read and whose member this agent's owner is (A2A), or refuse."""
    from circles.selectors import circle_get_for_agent

    try:
        return circle_get_for_agent(agent=token.agent, circle_id=circle)
    except Http404:
        raise ToolInputError(CIRCLE_NOT_FOUND.format(circle=circle)) from None


def _circle_memory_out(memory: Memory) -> dict[str, Any]:
    # Another member's memory: its owner by username, the people in it by name (the gate let it through),
    # the owner's Self as the owner (to another member, "Self" would be a stranger of that name).
    owner_name = memory.owner.get_username()
    return {
        **_memory_out(memory),
        "owner": owner_name,
        "people": [
            {
                "name": person_name_for_others(person=participant.person, owner_name=owner_name),
                "role": participant.role,
            }
            for participant in memory.participants.all()
        ],
        "told_by": (
            person_name_for_others(person=memory.source_person, owner_name=owner_name)
            if memory.source_person
            else None
        ),
    }


def _log_a2a(token: AccessToken, memories: list[Memory]) -> None:
    from circles.services import circle_access_log_record

    circle_access_log_record(
        memories=memories, viewer=token.owner, surface=AccessSurface.A2A, agent=token.agent
    )


def search_memories(*, token: AccessToken, query: str, limit: int = 10, circle: str = "") -> dict[str, Any]:
    query = _check_text(query, name="query", max_length=MAX_QUERY_LENGTH)
    limit = _check_limit(limit)
    answer: dict[str, Any] = {"query": query}
    with transaction.atomic():
        if circle:
            readable = _readable_circle(token, circle)
            hits = circle_memory_search(
                readable.pk,
                [token.owner.pk],
                query,
                limit=limit,
                for_agent=True,
                may_read_sensitive=token.agent.may_read_sensitive,
            )
            _log_a2a(token, [hit.memory for hit in hits])
            answer["circle"] = readable.name
            memory_out = _circle_memory_out
        else:
            hits = memory_search(
                token.owner,
                query,
                respect_consent=True,
                limit=limit,
                may_read_sensitive=token.agent.may_read_sensitive,
            )
            _log(token, [hit.memory for hit in hits])
            memory_out = _memory_out
    answer["results"] = [
        {**memory_out(hit.memory), "score": round(hit.score, 6)} for hit in _with_photo_counts(hits)
    ]
    return answer


def _person_out(token: AccessToken, person: Person) -> tuple[dict[str, Any], list[Memory]]:
    # Only people who granted consent reach this (mcp_people_named searches no one else).
    memories, memory_count = mcp_person_memories(
        owner=token.owner,
        person=person,
        limit=PERSON_MEMORY_LIMIT,
        may_read_sensitive=token.agent.may_read_sensitive,
    )
    return {
        "name": person.display_name,
        "aliases": list(person.aliases),
        "kind": person.kind,
        "consent": person.consent_status,
        "notes": person.notes,
        "memory_count": memory_count,
        "memories": [_memory_out(memory) for memory in photo_counts_attach(memories)],
    }, memories


def get_person(*, token: AccessToken, name: str) -> dict[str, Any]:
    name = _check_text(name, name="name", max_length=MAX_NAME_LENGTH)
    with transaction.atomic():
        people = mcp_people_named(owner=token.owner, name=name)
        if not people:
            raise ToolInputError(PERSON_NOT_FOUND.format(name=name))
        shown: list[dict[str, Any]] = []
        handed_out: list[Memory] = []
        for person in people:
            out, memories = _person_out(token, person)
            shown.append(out)
            handed_out += memories
        _log(token, handed_out)
    return {"query": name, "people": shown}


def timeline_window(
    *, token: AccessToken, start: str, end: str, limit: int = TIMELINE_DEFAULT_LIMIT, circle: str = ""
) -> dict[str, Any]:
    first, last = _parse_day(start, name="start"), _parse_day(end, name="end")
    if first > last:
        raise ToolInputError(f"start ({first.isoformat()}) must be on or before end ({last.isoformat()}).")
    limit = _check_limit(limit)
    window = {
        "start": first,
        "end": last,
        "limit": limit,
        "may_read_sensitive": token.agent.may_read_sensitive,
    }
    answer: dict[str, Any] = {"start": first.isoformat(), "end": last.isoformat()}
    with transaction.atomic():
        if circle:
            readable = _readable_circle(token, circle)
            memories, truncated = mcp_circle_timeline_window(circle=readable, viewer=token.owner, **window)
            _log_a2a(token, memories)
            answer["circle"] = readable.name
            memory_out = _circle_memory_out
        else:
            memories, truncated = mcp_timeline_window(owner=token.owner, **window)
            _log(token, memories)
            memory_out = _memory_out
    answer["memories"] = [memory_out(memory) for memory in photo_counts_attach(memories)]
    # Counted among gated memories only, like everything an agent is told.
    answer["truncated"] = truncated
    return answer


def _parse_memory_id(memory_id: str, *, name: str = "memory_id") -> uuid.UUID:
    try:
        return uuid.UUID(str(memory_id).strip())
    except ValueError:
        raise ToolInputError(f"{name} must be a memory's id (a UUID), not {memory_id!r}.") from None


def _circles_out(memory: Memory) -> list[dict[str, Any]]:
    # The same audit the owner's memory page shows, asked of the circles' gate. Only for a
    # memory the agent already sees: everyone in it has consented for agents.
    return [
        {
            "circle": circle_audit.circle.name,
            "members": [
                {"member": entry.label, "can_see": entry.visible, "why": entry.reasons}
                for entry in circle_audit.members
            ],
        }
        for circle_audit in memory_privacy_audit(memory=memory).circles
    ]


def privacy_audit(*, token: AccessToken, memory_id: str) -> dict[str, Any]:
    parsed_id = _parse_memory_id(memory_id)
    with transaction.atomic():
        memory = mcp_visible_memory(
            owner=token.owner, memory_id=parsed_id, may_read_sensitive=token.agent.may_read_sensitive
        )
        if memory is None:
            raise ToolInputError(MEMORY_NOT_FOUND)
        _log(token, [memory])
    participants = [
        {
            "name": participant.person.display_name,
            "role": participant.role,
            "consent": participant.person.consent_status,
            "consent_updated_at": participant.person.consent_updated_at.isoformat()
            if participant.person.consent_updated_at
            else None,
        }
        for participant in memory.participants.all()
    ]
    source = memory.source_person
    circles = _circles_out(memory)
    return {
        "memory": {
            "id": str(memory.pk),
            "title": memory.headline,
            "occurred_at": memory.occurred_at.isoformat(),
            "kind": memory.kind,
            "sensitivity": memory.sensitivity,
        },
        "owner": "The owner always sees every memory they recorded.",
        "agents": {
            "can_see": True,
            "why": (
                "Every person in it has granted consent"
                + (", including the person who told it" if source else "")
                + ("" if participants or source else " (nobody else is in it)")
                + "; it has not expired and has not been replaced by a newer memory. "
                "All of the owner's agents see it while that holds; if anyone in it withdraws "
                "consent, agents stop seeing it on the very next request."
            ),
        },
        "participants": participants,
        "told_by": {"name": source.display_name, "consent": source.consent_status} if source else None,
        "expires_at": memory.expires_at.isoformat() if memory.expires_at else None,
        "expiry": (
            f"Agents stop seeing it at {memory.expires_at.isoformat()} "
            f"({memory.kind} memories are short-lived); the owner keeps it."
            if memory.expires_at
            else f"Never expires ({memory.kind} memories are long-lived)."
        ),
        "superseded_by": None,
        "circles": circles,
        "other_people": (
            "Members of the circles listed, each as shown; nobody else."
            if circles
            else "Nobody else: it is shared into no circle; only the owner and the owner's agents see it."
        ),
    }


# --- proposals: the agent suggests, the owner decides in the app -----------------------------------

WAITING_FOR_OWNER = (
    "Proposed. Nothing is saved until the owner confirms it in Keepsake; they may edit or dismiss it, "
    "and you will not be told which."
)


def memory_propose(
    *, token: AccessToken, text: str, from_memories: list[str] | None = None
) -> dict[str, Any]:
    """Propose a memory (or, with `from_memories`, an insight generalised from them) for the owner.

    The answer never depends on who the text names: people are matched for the owner's
    eyes only. An insight's sources must be memories this agent may see (any other id is
    "Memory not found."), and an insight naming anyone in them is refused with the names,
    which the agent has already been shown.
    """
    text = _check_text(text, name="text", max_length=MAX_PROPOSAL_LENGTH)
    sources: list[Memory] = []
    if from_memories:
        if len(from_memories) > MAX_INSIGHT_SOURCES:
            raise ToolInputError(f"from_memories holds at most {MAX_INSIGHT_SOURCES} ids.")
        ids = list(dict.fromkeys(_parse_memory_id(value, name="from_memories") for value in from_memories))
        for memory_id in ids:
            memory = mcp_visible_memory(
                owner=token.owner, memory_id=memory_id, may_read_sensitive=token.agent.may_read_sensitive
            )
            if memory is None:
                raise ToolInputError(MEMORY_NOT_FOUND)
            sources.append(memory)
    try:
        proposal = memory_proposal_create(
            owner=token.owner, agent=token.agent, text=text, surface=ProposalSurface.MCP, sources=sources
        )
    except ValidationError as error:
        raise ToolInputError(" ".join(error.messages)) from None
    answer: dict[str, Any] = {
        "status": "waiting_for_owner",
        "proposal": str(proposal.pk),
        "message": WAITING_FOR_OWNER,
    }
    if sources:
        answer["warnings"] = [
            warning.message for warning in insight_check(text=text, source_memories=sources).warnings
        ]
    return answer


def consent_request(*, token: AccessToken, person_name: str, reason: str = "") -> dict[str, Any]:
    """Ask the owner to seek someone's consent. The same answer whoever the name is, or is not."""
    person_name = _check_text(person_name, name="person_name", max_length=MAX_NAME_LENGTH)
    if len(reason or "") > MAX_AGENT_REASON_LENGTH:
        raise ToolInputError(f"reason is too long (at most {MAX_AGENT_REASON_LENGTH} characters).")
    _check_storable(reason or "", name="reason")
    message = consent_request_from_agent(
        agent=token.agent, ask=AgentConsentAsk(person_name=person_name, reason=reason or "")
    )
    return {"status": "noted", "message": message}
