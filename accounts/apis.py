"""REST API for access tokens (`/api/v1/tokens/`).

Managed only from a signed-in session: a leaked token must not be able to mint
more tokens or revoke the owner's others.
"""

from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_errors import VALIDATION_ERROR, error_response
from accounts.authentication import SessionOnly
from accounts.models import TokenKind
from accounts.selectors import access_token_get, access_token_list
from accounts.services import access_token_create, access_token_revoke
from agents.selectors import agent_list
from config.api_inputs import StrictCharField, validated
from config.api_views import api_base, operation

SESSION_ONLY = error_response("Tokens are managed from a signed-in session, not with a bearer token.")


class TokenOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=TokenKind.choices)
    agent = serializers.UUIDField(source="agent_id", allow_null=True)
    agent_name = serializers.CharField(source="agent.name", allow_null=True, default=None)
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The readable start of the token: ks_<prefix>_…")
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)

    class Meta:
        ref_name = "AccessToken"


# Every token endpoint: a signed-in session only.
TokenApi = api_base("TokenApi", "tokens", SessionOnly)


class TokenListApi(TokenApi):
    class InputSerializer(serializers.Serializer):
        kind = serializers.ChoiceField(choices=TokenKind.choices)
        agent = serializers.UUIDField(
            required=False, allow_null=True, default=None, help_text="Required for agent tokens."
        )
        name = StrictCharField(max_length=100, allow_blank=True, required=False, default="")

        class Meta:
            ref_name = "AccessTokenCreate"

    class CreatedSerializer(TokenOutputSerializer):
        token = serializers.CharField(help_text="The full secret token. Shown once: store it now.")

        class Meta:
            ref_name = "AccessTokenCreated"

    @operation("tokens_list", {200: TokenOutputSerializer(many=True), 403: SESSION_ONLY})
    def get(self, request: Request) -> Response:
        """List your access tokens (session only)"""
        return Response(TokenOutputSerializer(access_token_list(owner=request.user), many=True).data)

    @operation(
        "tokens_create",
        {201: CreatedSerializer, 400: VALIDATION_ERROR, 403: SESSION_ONLY},
        request=InputSerializer,
    )
    def post(self, request: Request) -> Response:
        """Create an access token; the response carries the secret once (session only)"""
        data = validated(self.InputSerializer(data=request.data))
        agent = None
        if data["agent"] is not None:
            agent = agent_list(owner=request.user).filter(pk=data["agent"]).first()
            if agent is None:
                raise serializers.ValidationError({"agent": ["Unknown agent."]})
        token, raw_token = access_token_create(
            owner=request.user, kind=data["kind"], agent=agent, name=data["name"]
        )
        body = dict(TokenOutputSerializer(token).data)
        body["token"] = raw_token
        return Response(body, status=status.HTTP_201_CREATED)


class TokenRevokeApi(TokenApi):
    @operation(
        "tokens_revoke",
        {200: TokenOutputSerializer, 403: SESSION_ONLY, 404: error_response("Unknown token.")},
        request=None,
    )
    def post(self, request: Request, token_id) -> Response:
        """Revoke an access token (session only); revoking twice is harmless"""
        token = access_token_revoke(token=access_token_get(owner=request.user, token_id=token_id))
        return Response(TokenOutputSerializer(token).data)
