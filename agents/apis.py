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

from accounts.api_errors import error_response
from accounts.authentication import request_agent
from agents.models import AgentRole
from agents.selectors import agent_get, agent_list


class AgentOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    role = serializers.ChoiceField(choices=AgentRole.choices)
    instructions = serializers.CharField()
    is_builtin = serializers.BooleanField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Agent"


class AgentListApi(APIView):
    @extend_schema(
        operation_id="agents_list",
        summary="List agents (an agent token sees only itself)",
        responses={200: AgentOutputSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        agents = agent_list(owner=request.user, only=request_agent(request))
        return Response(AgentOutputSerializer(agents, many=True).data)


class AgentDetailApi(APIView):
    @extend_schema(
        operation_id="agents_retrieve",
        summary="Get an agent",
        responses={200: AgentOutputSerializer, 404: error_response("Unknown agent.")},
    )
    def get(self, request: Request, agent_id) -> Response:
        agent = agent_get(owner=request.user, agent_id=agent_id, only=request_agent(request))
        return Response(AgentOutputSerializer(agent).data)
