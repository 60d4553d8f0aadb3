"""REST API for circles and sharing (SPEC §4, §6 "Sharing").

Isolation: a circle, member, invite, join request, share or memory the caller may
not see answers 404 — the same body whether it exists or not — on every
endpoint. 403 is only for a member asking for an owner-only action on a circle
they belong to. Membership and consent are read fresh on every request (the gate
reads them in SQL): a removed member's next request is a 404.

Agent tokens get 404 on every endpoint here: circles are between people, and
agent-to-agent reads (SPEC §4, A2A) come later. Agents never write.

People's per-audience consents live here rather than in people/apis.py because
the audiences are circles: circles builds on people, never the other way round.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import exceptions, permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_errors import VALIDATION_ERROR, error_response
from accounts.authentication import AgentTokensNotFound, request_agent
from agents.models import AccessSurface
from circles.models import (
    CIRCLE_DESCRIPTION_MAX_LENGTH,
    CIRCLE_NAME_MAX_LENGTH,
    Circle,
    CircleInvite,
    JoinRequestStatus,
    MembershipRole,
)
from circles.selectors import (
    circle_get_for_agent,
    circle_get_for_member,
    circle_invite_get,
    circle_invites,
    circle_is_member,
    circle_join_request_get,
    circle_join_requests,
    circle_list_for_user,
    circle_members,
    circle_memory_get,
    circle_timeline,
    memory_share_list,
    person_audience_consents,
)
from circles.services import (
    INVITE_DEFAULT_DAYS,
    INVITE_MAX_DAYS,
    InviteInvalid,
    ShareRefused,
    circle_access_log_record,
    circle_create,
    circle_delete,
    circle_update,
    invite_accept,
    invite_create,
    invite_revoke,
    join_request_approve,
    join_request_decline,
    membership_remove,
    memory_share,
    memory_unshare,
)
from config.api_inputs import StrictCharField, validated
from config.api_outputs import page_links, page_of, results_of
from config.api_views import api_base, operation
from config.limits import API_MAX_OFFSET
from memories.gate_explain import memory_privacy_audit
from memories.models import Memory, MemoryKind, ParticipantRole, Sensitivity
from memories.retrieval import MAX_LIMIT, circle_memory_search
from memories.selectors import memory_get
from people.apis import (
    ConsentEventOutputSerializer,
    consent_change_input,
    consent_change_result,
    consent_set_from_api,
)
from people.models import AGENTS_AUDIENCE, CIRCLE_AUDIENCE_PREFIX, ConsentActor, ConsentStatus
from people.selectors import person_get, person_name_for_others
from people.services import audience_validate

NOT_FOUND = error_response(
    "Unknown, or not visible to the caller (not a member, another person's, or an agent token): "
    "always the same answer."
)
OWNER_ONLY = error_response("A member asked for something only the circle's owner may do.")
OWNER_RESPONSES = {403: OWNER_ONLY, 404: NOT_FOUND}


class AgentTokensReadCircles(permissions.BasePermission):
    """A member's agent token may GET a circle's memories (A2A; the view checks the circle allows it)."""

    def has_permission(self, request: Request, view: object) -> bool:
        if request_agent(request) is not None and request.method not in permissions.SAFE_METHODS:
            raise exceptions.NotFound()
        return True


# The endpoints' three kinds. Circles do not exist for agent tokens (404), except a circle's memories
# when it allows A2A.
# A circle endpoint: people's tokens only (an agent token's answer is 404).
CircleApi = api_base("CircleApi", "circles", AgentTokensNotFound)
# A read of a circle's memories: a member, or their agent when the circle allows A2A.
CircleReadApi = api_base("CircleReadApi", "circles", AgentTokensReadCircles)
# The owner's side of sharing one of their memories: people's tokens only.
SharingApi = api_base("SharingApi", "sharing", AgentTokensNotFound)


def _circle_reader(request: Request, circle_id):
    """(circle, agent or None): a member reading, or their agent when the circle lets members' agents read."""
    agent = request_agent(request)
    if agent is not None:
        return circle_get_for_agent(agent=agent, circle_id=circle_id), agent
    return circle_get_for_member(user=request.user, circle_id=circle_id), None


def _record_read(memories: list, request: Request, agent) -> None:
    if agent is None:
        circle_access_log_record(memories=memories, viewer=request.user)
    else:
        circle_access_log_record(
            memories=memories, viewer=request.user, surface=AccessSurface.A2A, agent=agent
        )


def _owned_circle(request: Request, circle_id, *, action: str) -> Circle:
    """A circle the caller belongs to (else 404) and owns (else 403 saying what only the owner may do)."""
    circle = circle_get_for_member(user=request.user, circle_id=circle_id)
    if circle.owner_id != request.user.pk:
        raise exceptions.PermissionDenied(f"Only the circle's owner can {action}.")
    return circle


# --- Shared output ------------------------------------------------------------------------------
class CircleRefSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()

    class Meta:
        ref_name = "CircleRef"


class UserRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField(source="get_username")

    class Meta:
        ref_name = "CircleUser"


class CircleOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    owner = UserRefSerializer()
    role = serializers.SerializerMethodField(help_text="The caller's role in the circle.")
    member_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Circle"

    @extend_schema_field(serializers.ChoiceField(choices=MembershipRole.choices))
    def get_role(self, circle: Circle) -> str:
        # The owner's membership is the owner role (circle_create makes it so).
        is_owner = circle.owner_id == self.context["user"].pk
        return MembershipRole.OWNER if is_owner else MembershipRole.MEMBER


class MemberOutputSerializer(serializers.Serializer):
    user = serializers.IntegerField(source="user_id")
    username = serializers.CharField(source="user.get_username")
    role = serializers.ChoiceField(choices=MembershipRole.choices)
    joined_at = serializers.DateTimeField()

    class Meta:
        ref_name = "CircleMember"


class CircleDetailOutputSerializer(CircleOutputSerializer):
    members = MemberOutputSerializer(many=True)

    class Meta:
        ref_name = "CircleDetail"


def _circle_detail(request: Request, circle: Circle) -> dict:
    """The circle as CircleDetailOutputSerializer documents it: the circle, then its members."""
    data = dict(CircleOutputSerializer(circle, context={"user": request.user}).data)
    data["members"] = MemberOutputSerializer(circle_members(circle=circle), many=True).data
    return data


class JoinRequestOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    circle = CircleRefSerializer()
    user = UserRefSerializer()
    status = serializers.ChoiceField(choices=JoinRequestStatus.choices)
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "JoinRequest"


# --- Circles ------------------------------------------------------------------------------------
class CircleListApi(CircleApi):
    class InputSerializer(serializers.Serializer):
        name = StrictCharField(max_length=CIRCLE_NAME_MAX_LENGTH)
        description = StrictCharField(
            max_length=CIRCLE_DESCRIPTION_MAX_LENGTH, allow_blank=True, required=False, default=""
        )

        class Meta:
            ref_name = "CircleCreate"

    OutputSerializer = results_of(CircleOutputSerializer, "CircleList")

    @operation("circles_list", {200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request) -> Response:
        """The circles I belong to, with my role and the member count"""
        circles = circle_list_for_user(user=request.user)
        return Response(
            {"results": CircleOutputSerializer(circles, many=True, context={"user": request.user}).data}
        )

    @operation(
        "circles_create",
        {201: CircleDetailOutputSerializer, 400: VALIDATION_ERROR, 404: NOT_FOUND},
        request=InputSerializer,
    )
    def post(self, request: Request) -> Response:
        """Create a circle (I become its owner)"""
        circle = circle_create(owner=request.user, **validated(self.InputSerializer(data=request.data)))
        circle = circle_get_for_member(user=request.user, circle_id=circle.pk)
        return Response(_circle_detail(request, circle), status=status.HTTP_201_CREATED)


class CircleDetailApi(CircleApi):
    class InputSerializer(serializers.Serializer):
        name = StrictCharField(max_length=CIRCLE_NAME_MAX_LENGTH, required=False)
        description = StrictCharField(
            max_length=CIRCLE_DESCRIPTION_MAX_LENGTH, allow_blank=True, required=False
        )

        class Meta:
            ref_name = "CircleUpdate"

    @operation("circles_retrieve", {200: CircleDetailOutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, circle_id) -> Response:
        """A circle I belong to, with its members"""
        circle = circle_get_for_member(user=request.user, circle_id=circle_id)
        return Response(_circle_detail(request, circle))

    @operation(
        "circles_partial_update",
        {
            200: CircleDetailOutputSerializer,
            400: VALIDATION_ERROR,
            403: OWNER_ONLY,
            404: NOT_FOUND,
        },
        request=InputSerializer,
    )
    def patch(self, request: Request, circle_id) -> Response:
        """Rename a circle or change its description (owner)"""
        circle = _owned_circle(request, circle_id, action="rename it or change its description")
        changes = validated(self.InputSerializer(data=request.data))
        circle = circle_update(circle=circle, by=request.user, **changes)
        return Response(_circle_detail(request, circle))

    @operation("circles_destroy", {204: None, **OWNER_RESPONSES})
    def delete(self, request: Request, circle_id) -> Response:
        """Delete a circle with its shares, invites and requests — never a memory (owner)"""
        circle = _owned_circle(request, circle_id, action="delete it; a member can leave it instead")
        circle_delete(circle=circle, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CircleMemberListApi(CircleApi):
    OutputSerializer = results_of(MemberOutputSerializer, "CircleMemberList")

    @operation("circles_members_list", {200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, circle_id) -> Response:
        """The members of a circle I belong to"""
        circle = circle_get_for_member(user=request.user, circle_id=circle_id)
        return Response({"results": MemberOutputSerializer(circle_members(circle=circle), many=True).data})


class CircleMemberDetailApi(CircleApi):
    @operation(
        "circles_members_destroy",
        {
            204: None,
            400: VALIDATION_ERROR,
            403: error_response("A member tried to remove someone else."),
            404: NOT_FOUND,
        },
    )
    def delete(self, request: Request, circle_id, user_id: int) -> Response:
        """Remove a member (owner), or leave the circle (my own user id); effective at once"""
        circle = circle_get_for_member(user=request.user, circle_id=circle_id)
        if user_id != request.user.pk and circle.owner_id != request.user.pk:
            raise exceptions.PermissionDenied(
                "Only the circle's owner can remove a member; you can remove yourself (leave)."
            )
        if not circle_is_member(circle=circle, user_id=user_id):
            raise exceptions.NotFound("No such member.")
        membership_remove(circle=circle, user_id=user_id, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- Invites and join requests ---------------------------------------------------------------------
class InviteOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    created_by = serializers.CharField(source="created_by.get_username")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    state = serializers.SerializerMethodField()

    class Meta:
        ref_name = "CircleInvite"

    @extend_schema_field(serializers.ChoiceField(choices=["active", "expired", "revoked"]))
    def get_state(self, invite: CircleInvite) -> str:
        if invite.revoked_at is not None:
            return "revoked"
        return "expired" if invite.expires_at <= timezone.now() else "active"


class CircleInviteListApi(CircleApi):
    class InputSerializer(serializers.Serializer):
        days = serializers.IntegerField(
            min_value=1,
            max_value=INVITE_MAX_DAYS,
            required=False,
            default=INVITE_DEFAULT_DAYS,
            help_text="How long the link works.",
        )

        class Meta:
            ref_name = "CircleInviteCreate"

    class CreatedSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        url = serializers.URLField(help_text="The invite page; whoever opens it signed in may ask to join.")
        token = serializers.CharField(help_text="Shown this once: only its hash is stored.")
        expires_at = serializers.DateTimeField()

        class Meta:
            ref_name = "CircleInviteCreated"

    OutputSerializer = results_of(InviteOutputSerializer, "CircleInviteList")

    @operation(
        "circles_invites_create",
        {201: CreatedSerializer, 400: VALIDATION_ERROR, **OWNER_RESPONSES},
        request=InputSerializer,
    )
    def post(self, request: Request, circle_id) -> Response:
        """Create an invite link (owner); the token is shown once"""
        circle = _owned_circle(request, circle_id, action="invite people")
        days = validated(self.InputSerializer(data=request.data))["days"]
        new = invite_create(circle=circle, by=request.user, days=days)
        return Response(
            {
                "id": new.invite.pk,
                "url": request.build_absolute_uri(reverse("circle_invite", kwargs={"token": new.token})),
                "token": new.token,
                "expires_at": new.invite.expires_at,
            },
            status=status.HTTP_201_CREATED,
        )

    @operation("circles_invites_list", {200: OutputSerializer, **OWNER_RESPONSES})
    def get(self, request: Request, circle_id) -> Response:
        """The circle's invite links, newest first, without their tokens (owner)"""
        circle = _owned_circle(request, circle_id, action="see its invites")
        invites = circle_invites(circle=circle).select_related("created_by")
        return Response({"results": InviteOutputSerializer(invites, many=True).data})


class CircleInviteDetailApi(CircleApi):
    @operation("circles_invites_destroy", {204: None, **OWNER_RESPONSES})
    def delete(self, request: Request, circle_id, invite_id) -> Response:
        """Revoke an invite link (owner); requests already made stay"""
        circle = _owned_circle(request, circle_id, action="revoke its invites")
        invite = circle_invite_get(circle=circle, invite_id=invite_id)
        invite_revoke(invite=invite, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InviteAcceptApi(CircleApi):
    @operation(
        "invites_accept",
        {
            201: JoinRequestOutputSerializer,
            400: error_response(
                "The link is not valid, was withdrawn or has expired, the caller is already a member, "
                "or the circle is full: the message says which."
            ),
            404: NOT_FOUND,
        },
        request=None,
    )
    def post(self, request: Request, token: str) -> Response:
        """Ask to join the invite's circle; its owner approves or declines"""
        try:
            join_request = invite_accept(token=token, user=request.user)
        except (InviteInvalid, DjangoValidationError) as exc:
            return Response({"detail": " ".join(exc.messages)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(JoinRequestOutputSerializer(join_request).data, status=status.HTTP_201_CREATED)


class CircleJoinRequestListApi(CircleApi):
    OutputSerializer = results_of(JoinRequestOutputSerializer, "JoinRequestList")

    @operation("circles_requests_list", {200: OutputSerializer, **OWNER_RESPONSES})
    def get(self, request: Request, circle_id) -> Response:
        """Requests to join waiting for a decision, newest first (owner)"""
        circle = _owned_circle(request, circle_id, action="see requests to join")
        requests = circle_join_requests(circle=circle).select_related("circle")
        return Response({"results": JoinRequestOutputSerializer(requests, many=True).data})


def _join_request_decision_api(verb: str, summary: str, decide) -> type[CircleApi]:
    """POST .../requests/{id}/<verb>/: the owner approves or declines a request to join."""

    class JoinRequestDecisionApi(CircleApi):
        @extend_schema(
            operation_id=f"circles_requests_{verb}",
            summary=summary,
            request=None,
            responses={200: JoinRequestOutputSerializer, 400: VALIDATION_ERROR, **OWNER_RESPONSES},
        )
        def post(self, request: Request, circle_id, request_id) -> Response:
            circle = _owned_circle(request, circle_id, action=f"{verb} requests to join")
            join_request = circle_join_request_get(circle=circle, request_id=request_id)
            decide(request=join_request, by=request.user)  # and records the decision on join_request
            return Response(JoinRequestOutputSerializer(join_request).data)

    return JoinRequestDecisionApi


CircleJoinRequestApproveApi = _join_request_decision_api(
    "approve", "Approve a request to join: the person becomes a member (owner)", join_request_approve
)
CircleJoinRequestDeclineApi = _join_request_decision_api(
    "decline", "Decline a request to join (owner)", join_request_decline
)


# --- What a member sees --------------------------------------------------------------------------
class CirclePersonOutputSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="As members read it: the owner's Self is the owner's username.")
    role = serializers.ChoiceField(choices=ParticipantRole.choices)

    class Meta:
        ref_name = "CircleMemoryPerson"


class CircleMemoryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    owner = serializers.CharField(source="owner.get_username", help_text="Whose memory it is.")
    title = serializers.CharField()
    body = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=MemoryKind.choices)
    sensitivity = serializers.ChoiceField(choices=Sensitivity.choices)
    people = serializers.SerializerMethodField(help_text="The people in it, by name.")
    told_by = serializers.SerializerMethodField(help_text="Who told it, if it was not seen first-hand.")
    score = serializers.SerializerMethodField(help_text="With q: higher is a better match. Else null.")

    class Meta:
        ref_name = "CircleMemory"

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_score(self, memory: Memory) -> float | None:
        return self.context.get("scores", {}).get(memory.pk)

    # Another member's Self is that member, by the username circles show, not someone called "Self".
    @extend_schema_field(CirclePersonOutputSerializer(many=True))
    def get_people(self, memory: Memory) -> list[dict]:
        owner_name = memory.owner.get_username()
        return [
            {
                "name": person_name_for_others(person=participant.person, owner_name=owner_name),
                "role": participant.role,
            }
            for participant in memory.participants.all()
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_told_by(self, memory: Memory) -> str | None:
        if memory.source_person is None:
            return None
        return person_name_for_others(person=memory.source_person, owner_name=memory.owner.get_username())


class CircleMemoryListApi(CircleReadApi):
    class FilterSerializer(serializers.Serializer):
        q = StrictCharField(
            max_length=1000,
            required=False,
            allow_blank=True,
            default="",
            help_text="Search by meaning and words (best matches first, no paging); else the timeline.",
        )
        limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=20)
        offset = serializers.IntegerField(
            min_value=0, max_value=API_MAX_OFFSET, default=0, help_text="Timeline only."
        )

        class Meta:
            ref_name = "CircleMemoryFilters"

    OutputSerializer = page_of(CircleMemoryOutputSerializer, "CircleMemoryPage")

    @operation(
        "circles_memories_list",
        {200: OutputSerializer, 400: VALIDATION_ERROR, 404: NOT_FOUND},
        parameters=[FilterSerializer],
    )
    def get(self, request: Request, circle_id) -> Response:
        """What I may see in a circle, newest first or by search, each with its owner"""
        circle, agent = _circle_reader(request, circle_id)
        params = validated(self.FilterSerializer(data=request.query_params))
        query, limit, offset = (params[key] for key in ("q", "limit", "offset"))
        if query:
            hits = circle_memory_search(
                circle.pk,
                [request.user.pk],
                query,
                limit=limit,
                for_agent=agent is not None,
                may_read_sensitive=agent is not None and agent.may_read_sensitive,
            )
            page = [hit.memory for hit in hits]
            scores = {hit.memory.pk: hit.score for hit in hits}
            count, next_url, previous_url = len(page), None, None
        else:
            memories = circle_timeline(circle=circle, viewer=request.user, agent=agent)
            count = memories.count()
            page = list(memories[offset : offset + limit])
            scores = {}
            next_url, previous_url = page_links(request, offset=offset, limit=limit, count=count)
        _record_read(page, request, agent)
        results = CircleMemoryOutputSerializer(page, many=True, context={"scores": scores}).data
        return Response({"count": count, "next": next_url, "previous": previous_url, "results": results})


class CircleMemoryDetailApi(CircleReadApi):
    @operation("circles_memories_retrieve", {200: CircleMemoryOutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, circle_id, memory_id) -> Response:
        """One memory I may see in a circle"""
        circle, agent = _circle_reader(request, circle_id)
        memory = circle_memory_get(circle=circle, viewer=request.user, memory_id=memory_id, agent=agent)
        _record_read([memory], request, agent)
        return Response(CircleMemoryOutputSerializer(memory).data)


# --- The owner's side: shares, the privacy audit ---------------------------------------------------
class ShareOutputSerializer(serializers.Serializer):
    circle = CircleRefSerializer()
    shared_by = serializers.CharField(source="shared_by.get_username")
    shared_at = serializers.DateTimeField()

    class Meta:
        ref_name = "MemoryShare"


class NotConsentedSerializer(serializers.Serializer):
    person = serializers.UUIDField(source="person.pk")
    name = serializers.CharField(source="person.display_name")
    status = serializers.ChoiceField(choices=ConsentStatus.choices)

    class Meta:
        ref_name = "NotConsented"


class ShareRefusedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    not_consented = NotConsentedSerializer(many=True)

    class Meta:
        ref_name = "ShareRefused"


class MemoryShareListApi(SharingApi):
    class InputSerializer(serializers.Serializer):
        circle = serializers.UUIDField(help_text="A circle I belong to.")

        class Meta:
            ref_name = "MemoryShareCreate"

    OutputSerializer = results_of(ShareOutputSerializer, "MemoryShareList")

    @operation("memories_shares_list", {200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, memory_id) -> Response:
        """The circles my memory is shared into (owner)"""
        memory = memory_get(owner=request.user, memory_id=memory_id)
        return Response({"results": ShareOutputSerializer(memory_share_list(memory=memory), many=True).data})

    @operation(
        "memories_shares_create",
        {
            201: ShareOutputSerializer,
            400: VALIDATION_ERROR,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ShareRefusedSerializer,
                description="Not everyone in the memory has consented for the circle; nothing was written.",
            ),
        },
        request=InputSerializer,
    )
    def post(self, request: Request, memory_id) -> Response:
        """Share my memory into a circle I belong to, if everyone in it consented for that circle"""
        memory = memory_get(owner=request.user, memory_id=memory_id)
        circle_id = validated(self.InputSerializer(data=request.data))["circle"]
        circle = circle_get_for_member(user=request.user, circle_id=circle_id)
        try:
            share = memory_share(memory=memory, circle=circle, by=request.user)
        except ShareRefused as refused:
            body = {"detail": refused.message, "not_consented": refused.not_consented}
            return Response(ShareRefusedSerializer(body).data, status=status.HTTP_409_CONFLICT)
        return Response(ShareOutputSerializer(share).data, status=status.HTTP_201_CREATED)


class MemoryShareDetailApi(SharingApi):
    @operation("memories_shares_destroy", {204: None, 404: NOT_FOUND})
    def delete(self, request: Request, memory_id, circle_id) -> Response:
        """Unshare my memory from a circle (owner); members stop seeing it at once"""
        memory = memory_get(owner=request.user, memory_id=memory_id)
        share = memory_share_list(memory=memory).filter(circle_id=circle_id).first()
        if share is None:
            raise exceptions.NotFound("Not shared into that circle.")
        memory_unshare(memory=memory, circle=share.circle, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditEntrySerializer(serializers.Serializer):
    visible = serializers.BooleanField()
    reasons = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "AuditEntry"


class AuditMemberSerializer(AuditEntrySerializer):
    user = serializers.IntegerField(source="user.pk")
    username = serializers.CharField(source="label")

    class Meta:
        ref_name = "AuditMember"


class AuditCircleSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="circle.pk")
    name = serializers.CharField(source="circle.name")
    members = AuditMemberSerializer(many=True)

    class Meta:
        ref_name = "AuditCircle"


class MemoryAuditApi(SharingApi):
    class OutputSerializer(serializers.Serializer):
        memory = serializers.UUIDField(source="memory.pk")
        owner = AuditEntrySerializer()
        agents = AuditEntrySerializer()
        circles = AuditCircleSerializer(many=True)

        class Meta:
            ref_name = "PrivacyAudit"

    @operation("memories_audit", {200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, memory_id) -> Response:
        """Who can see my memory, and why: me, my agents, each circle member by member (owner)"""
        memory = memory_get(owner=request.user, memory_id=memory_id)
        return Response(self.OutputSerializer(memory_privacy_audit(memory=memory)).data)


# --- A person's consent, audience by audience ---------------------------------------------------------
class AudienceConsentSerializer(serializers.Serializer):
    audience = serializers.CharField(help_text="`agents` or `circle:<circle id>`.")
    label = serializers.CharField()
    circle = CircleRefSerializer(allow_null=True)
    status = serializers.ChoiceField(choices=ConsentStatus.choices)
    reason = serializers.CharField()
    updated_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.ChoiceField(choices=ConsentActor.choices)

    class Meta:
        ref_name = "AudienceConsent"


@extend_schema(tags=["people"])
class PersonAudienceConsentsApi(CircleApi):
    class InputSerializer(
        consent_change_input(
            "AudienceConsentChange",
            audience=StrictCharField(
                max_length=100, help_text="`agents`, or `circle:<circle id>` for a circle I belong to."
            ),
        )
    ):
        def validate_audience(self, value: str) -> str:
            unknown = "Unknown audience: use 'agents' or 'circle:<circle id>' for a circle you belong to."
            try:
                audience = audience_validate(value)
            except DjangoValidationError:
                raise serializers.ValidationError(unknown) from None
            if audience == AGENTS_AUDIENCE:
                return audience
            circle_id = audience.removeprefix(CIRCLE_AUDIENCE_PREFIX)
            if not circle_list_for_user(user=self.context["user"]).filter(pk=circle_id).exists():
                raise serializers.ValidationError(unknown)
            return audience

    OutputSerializer = results_of(AudienceConsentSerializer, "AudienceConsentList")

    ChangedSerializer = consent_change_result(
        "AudienceConsentChangeResult", consent=AudienceConsentSerializer()
    )

    @operation("people_consents_list", {200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, person_id) -> Response:
        """A person's consent for every audience: my agents, then each of my circles"""
        person = person_get(owner=request.user, person_id=person_id)
        consents = person_audience_consents(person=person)
        return Response({"results": AudienceConsentSerializer(consents, many=True).data})

    @operation(
        "people_consents_set",
        {
            200: ChangedSerializer,
            400: VALIDATION_ERROR,
            403: error_response(
                "The person is linked to their own account and decides for themself: "
                "the owner may revoke or reset to pending, never grant."
            ),
            404: NOT_FOUND,
        },
        request=InputSerializer,
    )
    def post(self, request: Request, person_id) -> Response:
        """Set a person's consent for one audience (recorded with surface “api”)"""
        person = person_get(owner=request.user, person_id=person_id)
        change = validated(self.InputSerializer(data=request.data, context={"user": request.user}))
        audience = change["audience"]
        event = consent_set_from_api(request, person, change, audience=audience)
        consent = next(row for row in person_audience_consents(person=person) if row.audience == audience)
        return Response(
            {
                "consent": AudienceConsentSerializer(consent).data,
                "event": None if event is None else ConsentEventOutputSerializer(event).data,
            }
        )
