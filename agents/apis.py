"""REST API for the owner's agents (`/api/v1/agents/`), read-only.

An agent token sees only its own agent: the owner's other agents (and their
instructions) are none of its business.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api_errors import VALIDATION_ERROR, error_response
from accounts.authentication import request_agent
from agents.models import AccessSurface, AgentRole
from agents.selectors import agent_get, agent_list, conversation_get
from agents.services import MAX_MESSAGE_LENGTH, chat_turn


class AgentOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=AgentRole.choices)
    instructions = serializers.CharField()
    is_builtin = serializers.BooleanField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Agent"


@extend_schema(tags=["agents"])
class AgentListApi(APIView):
    @extend_schema(
        operation_id="agents_list",
        summary="List agents (an agent token sees only itself)",
        responses={200: AgentOutputSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        agents = agent_list(owner=request.user, only=request_agent(request))
        return Response(AgentOutputSerializer(agents, many=True).data)


@extend_schema(tags=["agents"])
class AgentDetailApi(APIView):
    @extend_schema(
        operation_id="agents_retrieve",
        summary="Get an agent",
        responses={200: AgentOutputSerializer, 404: error_response("Unknown agent.")},
    )
    def get(self, request: Request, agent_id) -> Response:
        agent = agent_get(owner=request.user, agent_id=agent_id, only=request_agent(request))
        return Response(AgentOutputSerializer(agent).data)


class ChatCitationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField(source="headline")
    occurred_at = serializers.DateTimeField()

    class Meta:
        ref_name = "AgentChatCitation"


@extend_schema(tags=["agents"])
class AgentChatApi(APIView):
    """One chat turn, the same as the web chat (surface `api` in the access log).

    Agent tokens may call it for their own agent only: like GET /agents/{id}/, any
    other agent answers 404 — for that token it does not exist, and a 403 would
    confirm the id. Chatting writes only the conversation's messages; consent and
    memories stay out of reach (AgentTokensReadOnly guards every other write).
    An owner token's reply may name people the question mentioned who have not
    consented; an agent token's never does (the reply would confirm they exist).
    """

    class InputSerializer(serializers.Serializer):
        message = serializers.CharField(max_length=MAX_MESSAGE_LENGTH)
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

        class Meta:
            ref_name = "AgentChatResponse"

    @extend_schema(
        operation_id="agents_chat",
        summary="Chat with an agent (owner token, or that agent's own token)",
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: VALIDATION_ERROR,
            404: error_response(
                "Unknown agent or conversation "
                "(an agent token only knows its own agent and that agent's conversations)."
            ),
        },
    )
    def post(self, request: Request, agent_id) -> Response:
        asking_agent = request_agent(request)
        agent = agent_get(owner=request.user, agent_id=agent_id, only=asking_agent)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation = None
        if serializer.validated_data.get("conversation") is not None:
            conversation = conversation_get(
                owner=request.user, agent=agent, conversation_id=serializer.validated_data["conversation"]
            )
        turn = chat_turn(
            owner=request.user,
            agent=agent,
            text=serializer.validated_data["message"],
            conversation=conversation,
            surface=AccessSurface.API,
            asked_by_agent=asking_agent is not None,
        )
        return Response(self.OutputSerializer(turn).data)
