"""REST API for the owner's agents (`/api/v1/agents/`), read-only.

An agent token sees only its own agent: the owner's other agents (and their
instructions) are none of its business.
"""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_errors import AGENT_FORBIDDEN, VALIDATION_ERROR, error_response
from accounts.authentication import AgentTokensReadOnly, request_agent
from agents.models import AccessSurface, AgentRole
from agents.proposals import (
    MAX_AGENT_REASON_LENGTH,
    AgentConsentAsk,
    consent_request_from_agent,
)
from agents.selectors import agent_get, agent_list, conversation_get
from agents.services import MAX_MESSAGE_LENGTH, agent_set_sensitive_clearance, chat_turn
from config.api_inputs import StrictBooleanField, StrictCharField, validated
from config.api_views import api_base, operation


class AgentOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=AgentRole.choices)
    instructions = serializers.CharField()
    is_builtin = serializers.BooleanField()
    may_read_sensitive = serializers.BooleanField(
        help_text="Whether memories marked sensitive (that everyone in them consented to) reach this agent "
        "and its language model. Off by default."
    )
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Agent"


# Owner tokens, and an agent's own token for itself (each view says what it allows).
AgentApi = api_base("AgentApi", "agents")


class AgentListApi(AgentApi):
    @operation("agents_list", {200: AgentOutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        """List agents (an agent token sees only itself)"""
        agents = agent_list(owner=request.user, only=request_agent(request))
        return Response(AgentOutputSerializer(agents, many=True).data)


class AgentDetailApi(AgentApi):
    # An agent token reads itself; only the owner changes what an agent may read.
    permission_classes = [IsAuthenticated, AgentTokensReadOnly]

    @operation("agents_retrieve", {200: AgentOutputSerializer, 404: error_response("Unknown agent.")})
    def get(self, request: Request, agent_id) -> Response:
        """Get an agent"""
        agent = agent_get(owner=request.user, agent_id=agent_id, only=request_agent(request))
        return Response(AgentOutputSerializer(agent).data)

    class UpdateSerializer(serializers.Serializer):
        may_read_sensitive = StrictBooleanField(
            help_text="Allow (true) or stop (false) sensitive memories reaching this agent."
        )

        class Meta:
            ref_name = "AgentUpdate"

    @operation(
        "agents_partial_update",
        {
            200: AgentOutputSerializer,
            400: VALIDATION_ERROR,
            403: AGENT_FORBIDDEN,
            404: error_response("Unknown agent."),
        },
        request=UpdateSerializer,
    )
    def patch(self, request: Request, agent_id) -> Response:
        """Allow or stop sensitive memories for an agent (owner token only)"""
        agent = agent_get(owner=request.user, agent_id=agent_id, only=request_agent(request))
        may_read_sensitive = validated(self.UpdateSerializer(data=request.data))["may_read_sensitive"]
        agent = agent_set_sensitive_clearance(agent=agent, may_read_sensitive=may_read_sensitive)
        return Response(AgentOutputSerializer(agent).data)


class ChatCitationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField(source="headline")
    occurred_at = serializers.DateTimeField()

    class Meta:
        ref_name = "AgentChatCitation"


class AgentChatApi(AgentApi):
    """One chat turn, the same as the web chat (surface `api` in the access log).

    Agent tokens may call it for their own agent only: like GET /agents/{id}/, any
    other agent answers 404 — for that token it does not exist, and a 403 would
    confirm the id. Chatting writes only the conversation's messages; consent and
    memories stay out of reach (AgentTokensReadOnly guards every other write).
    An owner token's reply may name people the question mentioned who have not
    consented; an agent token's never does (the reply would confirm they exist).
    """

    class InputSerializer(serializers.Serializer):
        message = StrictCharField(max_length=MAX_MESSAGE_LENGTH)
        conversation = serializers.UUIDField(
            required=False, allow_null=True, help_text="Continue this conversation; omit to start a new one."
        )

        class Meta:
            ref_name = "AgentChatRequest"

    class OutputSerializer(serializers.Serializer):
        reply = serializers.CharField(source="reply.content")
        conversation = serializers.UUIDField(source="conversation.id")
        citations = ChatCitationSerializer(
            many=True,
            source="memories",
            help_text="The memories handed to the agent for this reply (all consent-gated).",
        )
        error = serializers.BooleanField(
            source="reply.is_error",
            help_text="True when the language model failed (timeout, HTTP error): `reply` says what "
            "happened; the message is saved, send it again to retry.",
        )
        proposal = serializers.UUIDField(
            source="proposal.pk",
            allow_null=True,
            default=None,
            help_text='For a message starting "remember that …": the memory proposal waiting for the '
            "owner (nothing is saved until they confirm it in the app); otherwise null.",
        )

        class Meta:
            ref_name = "AgentChatResponse"

    @operation(
        "agents_chat",
        {
            200: OutputSerializer,
            400: VALIDATION_ERROR,
            404: error_response(
                "Unknown agent or conversation "
                "(an agent token only knows its own agent and that agent's conversations)."
            ),
        },
        request=InputSerializer,
    )
    def post(self, request: Request, agent_id) -> Response:
        """Chat with an agent (owner token, or that agent's own token)"""
        asking_agent = request_agent(request)
        agent = agent_get(owner=request.user, agent_id=agent_id, only=asking_agent)
        data = validated(self.InputSerializer(data=request.data))
        conversation = None
        if data.get("conversation") is not None:
            conversation = conversation_get(
                owner=request.user, agent=agent, conversation_id=data["conversation"]
            )
        turn = chat_turn(
            owner=request.user,
            agent=agent,
            text=data["message"],
            conversation=conversation,
            surface=AccessSurface.API,
            asked_by_agent=asking_agent is not None,
        )
        return Response(self.OutputSerializer(turn).data)


class AgentConsentRequestApi(AgentApi):
    """An agent asks the owner to seek someone's consent (the MCP tool `consent_request`, over HTTP).

    The answer is the same 202 and the same words whether the person exists, has not
    consented, has already consented or does not exist: an agent must not learn who is
    in the journal. A request is recorded only for someone who has not consented, and
    waits on their page (or, for a linked person, with them). Agent tokens may ask for
    their own agent only; any other agent answers 404, like the chat.
    """

    class InputSerializer(serializers.Serializer):
        person_name = StrictCharField(
            required=False, allow_blank=True, max_length=200, help_text="Whole name or alias."
        )
        person = serializers.UUIDField(required=False, allow_null=True, help_text="Or the person's id.")
        reason = StrictCharField(
            required=False,
            allow_blank=True,
            max_length=MAX_AGENT_REASON_LENGTH,
            default="",
            help_text="Why the agent needs their consent: shown to the owner only.",
        )

        class Meta:
            ref_name = "AgentConsentRequest"

        def validate(self, attrs: dict) -> dict:
            if not (attrs.get("person_name") or "").strip() and attrs.get("person") is None:
                raise serializers.ValidationError("Give person_name or person.")
            return attrs

    class OutputSerializer(serializers.Serializer):
        detail = serializers.CharField()

        class Meta:
            ref_name = "AgentConsentRequestAnswer"

    @operation(
        "agents_consent_request",
        {
            202: OutputSerializer,
            400: VALIDATION_ERROR,
            404: error_response("Unknown agent (an agent token only knows its own agent)."),
        },
        request=InputSerializer,
    )
    def post(self, request: Request, agent_id) -> Response:
        """Ask the owner to seek a person's consent (the same answer whoever it is)"""
        agent = agent_get(owner=request.user, agent_id=agent_id, only=request_agent(request))
        data = validated(self.InputSerializer(data=request.data))
        ask = AgentConsentAsk(
            person_name=data.get("person_name") or "", person_id=data.get("person"), reason=data["reason"]
        )
        detail = consent_request_from_agent(agent=agent, ask=ask)
        return Response(self.OutputSerializer({"detail": detail}).data, status=202)
