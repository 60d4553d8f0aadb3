"""Reads for circles. Whatever a member may see comes from the one gate
(memories.retrieval.circle_visible_memories); nothing here decides visibility.

Access: a circle, invite, request or share the caller may not see is a 404
(`get_object_or_404` on a queryset already narrowed to what they may see).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Exists, OuterRef, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from agents.models import Agent
from circles.models import Circle, CircleInvite, CircleMembership, JoinRequest, JoinRequestStatus, MemoryShare
from circles.services import NotConsented, share_blockers
from memories.gate import circle_members_who_would_see, circle_visible_memories, circles_agents_may_read
from memories.gate_explain import member_reasons
from memories.models import Memory
from memories.retrieval import circle_memory_timeline
from people.models import (
    AGENTS_AUDIENCE,
    CIRCLE_AUDIENCE_PREFIX,
    ConsentActor,
    ConsentStatus,
    Person,
    PersonConsent,
    circle_audience,
)

# --- circles and members -----------------------------------------------------------------


def circle_list_for_user(*, user: AbstractBaseUser) -> QuerySet[Circle]:
    """The circles the user belongs to, with member counts. Nobody else's, even for an admin."""
    mine = CircleMembership.objects.filter(circle_id=OuterRef("pk"), user_id=user.pk)
    return (
        Circle.objects.filter(Exists(mine))
        .select_related("owner")
        .annotate(member_count=Count("memberships", distinct=True))
        .order_by("name", "created_at")
    )


def circle_get_for_member(*, user: AbstractBaseUser, circle_id: object) -> Circle:
    """A circle the user belongs to, or 404 — read fresh on every request."""
    try:
        uuid.UUID(str(circle_id))
    except ValueError:
        raise Http404("No such circle.") from None
    return get_object_or_404(circle_list_for_user(user=user), pk=circle_id)


def circle_members(*, circle: Circle) -> QuerySet[CircleMembership]:
    return circle.memberships.select_related("user").order_by("-role", "joined_at")


def circle_member_ids(*, circle: Circle) -> list[int]:
    return list(circle.memberships.values_list("user_id", flat=True))


def circle_is_member(*, circle: Circle, user_id: int) -> bool:
    return CircleMembership.objects.filter(circle=circle, user_id=user_id).exists()


def circle_invites(*, circle: Circle) -> QuerySet[CircleInvite]:
    return circle.invites.all()


def circle_invite_get(*, circle: Circle, invite_id: object) -> CircleInvite:
    return get_object_or_404(circle.invites.all(), pk=invite_id)


def circle_join_requests(*, circle: Circle, pending_only: bool = True) -> QuerySet[JoinRequest]:
    requests = circle.join_requests.select_related("user")
    return requests.filter(status=JoinRequestStatus.PENDING) if pending_only else requests


def circle_join_request_get(*, circle: Circle, request_id: object) -> JoinRequest:
    try:
        uuid.UUID(str(request_id))
    except ValueError:
        raise Http404("No such request.") from None
    return get_object_or_404(circle.join_requests.select_related("circle", "user"), pk=request_id)


def join_request_for_user(*, circle: Circle, user: AbstractBaseUser) -> JoinRequest | None:
    return circle.join_requests.filter(user=user).order_by("-created_at").first()


# --- what a member sees ------------------------------------------------------------------------


def circle_timeline(
    *, circle: Circle, viewer: AbstractBaseUser, agent: Agent | None = None
) -> QuerySet[Memory]:
    """What the viewer (or the viewer's `agent`, A2A) may see in the circle, newest first (the gate)."""
    return circle_memory_timeline(
        circle.pk,
        [viewer.pk],
        for_agent=agent is not None,
        may_read_sensitive=agent is not None and agent.may_read_sensitive,
    )


def circle_memory_get(
    *, circle: Circle, viewer: AbstractBaseUser, memory_id: object, agent: Agent | None = None
) -> Memory:
    try:
        uuid.UUID(str(memory_id))
    except ValueError:
        raise Http404("No such memory.") from None
    return get_object_or_404(circle_timeline(circle=circle, viewer=viewer, agent=agent), pk=memory_id)


def circle_get_for_agent(*, agent, circle_id: object) -> Circle:
    """A circle a member's agent may read (A2A): its owner is a member and the circle allows it; else 404.

    Read fresh on every request: switching the setting off, or the member
    leaving, takes effect on the agent's next call.
    """
    try:
        uuid.UUID(str(circle_id))
    except ValueError:
        raise Http404("No such circle.") from None
    admitted = circles_agents_may_read(agent.owner_id).values("pk")
    return get_object_or_404(circle_list_for_user(user=agent.owner).filter(pk__in=admitted), pk=circle_id)


def memory_get_for_viewer(*, viewer: AbstractBaseUser, memory_id: object) -> tuple[Memory, list[Circle]]:
    """A memory someone else shared that the viewer may see in some circle, with those circles; or 404."""
    try:
        uuid.UUID(str(memory_id))
    except ValueError:
        raise Http404("No such memory.") from None
    circles = []
    found = None
    for circle in circle_list_for_user(user=viewer).filter(shares__memory_id=memory_id).distinct():
        memory = circle_timeline(circle=circle, viewer=viewer).filter(pk=memory_id).first()
        if memory is not None:
            found = memory
            circles.append(circle)
    if found is None:
        raise Http404("No such memory.")
    return found, circles


# --- the owner's side: shares, consents, the privacy audit ---------------------------------------


def memory_share_list(*, memory: Memory) -> QuerySet[MemoryShare]:
    return (
        MemoryShare.objects.filter(memory=memory)
        .select_related("circle", "shared_by")
        .order_by("circle__name")
    )


@dataclass
class ShareAction:
    """What the owner can do so that a member sees it: a label and where to do it."""

    label: str
    url: str


@dataclass
class MemberPreview:
    """One member of a circle: would they see this memory there, why not, and what would change it."""

    user: AbstractBaseUser
    sees: bool
    reasons: list[str]
    actions: list[ShareAction]


@dataclass
class SharePanelRow:
    circle: Circle
    shared: bool
    not_consented: list[NotConsented]
    members: list[MemberPreview] = field(default_factory=list)

    @property
    def seen_count(self) -> int:
        return sum(1 for member in self.members if member.sees)

    @property
    def member_count(self) -> int:
        return len(self.members)


def _member_actions(
    memory: Memory, circle: Circle, reasons: list[str], blockers: list[NotConsented]
) -> list[ShareAction]:
    from django.urls import reverse

    actions = []
    edit = reverse("memory_edit", args=[memory.pk]) + "#id_sensitivity"
    if any(reason.startswith("personal") for reason in reasons):
        actions.append(ShareAction(label="mark it public", url=edit))
    elif any(reason.startswith("sensitive") for reason in reasons):
        actions.append(ShareAction(label="mark it personal or public", url=edit))
    for item in blockers:
        actions.append(
            ShareAction(
                label=f"ask {item.person.display_name} for consent to {circle.name}",
                url=reverse("person_detail", args=[item.person.pk]) + f"#audience-{circle.pk}",
            )
        )
    return actions


def memory_share_preview(
    *, memory: Memory, circle: Circle, blockers: list[NotConsented] | None = None
) -> list[MemberPreview]:
    """Member by member: who will see the memory in the circle (the gate, share assumed), and why not."""
    if blockers is None:
        blockers = share_blockers(memory=memory, circle=circle)
    memberships = list(circle_members(circle=circle))
    sees = circle_members_who_would_see(memory, circle.pk, [membership.user_id for membership in memberships])
    previews = []
    for membership in memberships:
        member = membership.user
        if member.pk == memory.owner_id:
            previews.append(MemberPreview(user=member, sees=True, reasons=["you: the owner"], actions=[]))
            continue
        reasons = (
            []
            if sees[member.pk]
            else member_reasons(
                memory, circle, member, blockers=[(item.person, item.status) for item in blockers]
            )
        )
        if not sees[member.pk] and not reasons:
            reasons = ["not shown in this circle"]
        previews.append(
            MemberPreview(
                user=member,
                sees=sees[member.pk],
                reasons=reasons,
                actions=[] if sees[member.pk] else _member_actions(memory, circle, reasons, blockers),
            )
        )
    return previews


def memory_share_panel(*, memory: Memory, owner: AbstractBaseUser) -> list[SharePanelRow]:
    """For each of the owner's circles: is the memory shared there, who has not consented, and
    member by member who will see it there (and why not)."""
    shared = set(MemoryShare.objects.filter(memory=memory).values_list("circle_id", flat=True))
    rows = []
    for circle in circle_list_for_user(user=owner):
        blockers = share_blockers(memory=memory, circle=circle)
        rows.append(
            SharePanelRow(
                circle=circle,
                shared=circle.pk in shared,
                not_consented=blockers,
                members=memory_share_preview(memory=memory, circle=circle, blockers=blockers),
            )
        )
    return rows


def circle_seen_counts(*, circle: Circle, memory_ids: list[uuid.UUID]) -> tuple[dict[uuid.UUID, int], int]:
    """For memories on a circle's page: how many of its members see each (the gate, member by member),
    and how many members there are."""
    member_ids = circle_member_ids(circle=circle)
    counts: dict[uuid.UUID, int] = dict.fromkeys(memory_ids, 0)
    if not memory_ids:
        return counts, len(member_ids)
    for member_id in member_ids:
        for memory_id in (
            circle_visible_memories(circle.pk, [member_id])
            .filter(pk__in=memory_ids)
            .values_list("pk", flat=True)
        ):
            counts[memory_id] += 1
    return counts, len(member_ids)


@dataclass
class AudienceConsent:
    audience: str
    label: str
    circle: Circle | None
    status: str
    reason: str
    updated_at: object
    updated_by: str


def person_audience_consents(*, person: Person) -> list[AudienceConsent]:
    """The person's consent for every audience of their owner: My agents, then each circle the owner is in."""
    rows = {row.audience: row for row in PersonConsent.objects.filter(person=person)}
    audiences: list[tuple[str, str, Circle | None]] = [(AGENTS_AUDIENCE, "My agents", None)]
    for circle in circle_list_for_user(user=person.owner):
        audiences.append((circle_audience(circle.pk), circle.name, circle))
    result = []
    for audience, label, circle in audiences:
        row = rows.get(audience)
        if audience == AGENTS_AUDIENCE:
            status = person.consent_status  # the column the agents' gate reads
        elif person.is_self:
            status = ConsentStatus.GRANTED  # sharing your own memory is your consent
        else:
            status = row.status if row is not None else ConsentStatus.PENDING
        result.append(
            AudienceConsent(
                audience=audience,
                label=label,
                circle=circle,
                status=status,
                reason=row.reason if row is not None else "",
                updated_at=row.updated_at if row is not None else None,
                updated_by=row.updated_by if row is not None else ConsentActor.OWNER,
            )
        )
    return result


def circles_shared_into(*, memory: Memory) -> list[Circle]:
    return [share.circle for share in memory_share_list(memory=memory)]


# --- pages: owner-only getters, waiting requests, audience labels ------------------------------


def circle_get_for_owner(*, user: AbstractBaseUser, circle_id: object) -> Circle:
    """A circle the user owns, or 404 — a member who is not its owner cannot manage it either."""
    circle = circle_get_for_member(user=user, circle_id=circle_id)
    if circle.owner_id != user.pk:
        raise Http404("No such circle.")
    return circle


def circle_invite_get_for_owner(
    *, user: AbstractBaseUser, circle_id: object, invite_id: object
) -> CircleInvite:
    circle = circle_get_for_owner(user=user, circle_id=circle_id)
    try:
        uuid.UUID(str(invite_id))
    except ValueError:
        raise Http404("No such invite.") from None
    return get_object_or_404(circle.invites.select_related("circle"), pk=invite_id)


def join_requests_waiting_for_user(*, user: AbstractBaseUser) -> QuerySet[JoinRequest]:
    """The user's own requests still waiting for a circle's owner (circle names only they asked for)."""
    return (
        JoinRequest.objects.filter(user=user, status=JoinRequestStatus.PENDING)
        .select_related("circle", "circle__owner")
        .order_by("-created_at")
    )


def circle_pending_request_counts(*, user: AbstractBaseUser) -> dict[uuid.UUID, int]:
    """For each circle the user owns: how many join requests wait for them."""
    return dict(
        JoinRequest.objects.filter(circle__owner=user, status=JoinRequestStatus.PENDING)
        .values("circle_id")
        .annotate(count=Count("pk"))
        .values_list("circle_id", "count")
    )


def consent_audience_labels(*, owner: AbstractBaseUser, audiences: list[str]) -> dict[str, str]:
    """A label for each audience in a consent history: "My agents", or the circle's name.

    Only circles the owner belongs to are named; any other audience (a deleted
    circle, one they left) is "a former circle", never another circle's name.
    """
    names = {
        circle_audience(circle.pk): circle.name
        for circle in circle_list_for_user(user=owner).filter(
            pk__in=[
                audience.removeprefix(CIRCLE_AUDIENCE_PREFIX)
                for audience in set(audiences)
                if audience.startswith(CIRCLE_AUDIENCE_PREFIX)
            ]
        )
    }
    return {
        audience: "My agents" if audience == AGENTS_AUDIENCE else names.get(audience, "a former circle")
        for audience in audiences
    }
