"""Bearer-token authentication and the access rules every API view shares."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, permissions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from accounts import ratelimits
from accounts.models import AccessToken
from accounts.services import access_token_authenticate
from agents.models import Agent


class TokenAttemptsThrottled(exceptions.Throttled):
    """429 with Retry-After (DRF sets the header from `wait`); the detail says why and how long."""

    def __init__(self, *, wait: int, detail: str) -> None:
        super().__init__(detail=detail)  # without DRF's "Expected available in …": the detail says it
        self.wait = wait


class BearerTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer ks_<prefix>_<secret>`.

    Listed first in REST_FRAMEWORK so that an anonymous request answers 401 with
    a `WWW-Authenticate: Bearer` challenge rather than session auth's bare 403.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[object, AccessToken] | None:
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        try:
            # The token is read first: a valid one always works, whatever else this
            # address has tried; only failures are counted, and refused past the limit.
            token = self._token(header)
            if token is None:
                ratelimits.token_failure_record(request)
                raise exceptions.AuthenticationFailed(self._failure_message(header))
            ratelimits.token_request_record(request, owner_id=token.owner_id)
        except ratelimits.TokenAttemptsLimited as limited:
            raise TokenAttemptsThrottled(wait=limited.limited.retry_after, detail=limited.message) from None
        return token.owner, token

    @staticmethod
    def _token(header: list[bytes]) -> AccessToken | None:
        if len(header) != 2:
            return None
        try:
            raw_token = header[1].decode()
        except UnicodeDecodeError:
            return None
        return access_token_authenticate(raw_token=raw_token)

    @staticmethod
    def _failure_message(header: list[bytes]) -> str:
        if len(header) != 2:
            return "Malformed Authorization header: expected “Bearer <token>”."
        return "Invalid or revoked token."

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An access token `ks_<prefix>_<secret>`. Owner tokens act as the owner; "
            "agent tokens only ever read consent-gated memories and cannot write.",
        }


def request_agent(request: Request) -> Agent | None:
    """The agent a request acts for, or None when the owner is calling."""
    token = request.auth
    if isinstance(token, AccessToken) and token.is_agent:
        return token.agent
    return None


class AgentTokensReadOnly(permissions.BasePermission):
    """Agents may read (through the consent gate); they never write or change consent."""

    message = "Agent tokens are read-only: they cannot create, edit or delete anything, or change consent."

    def has_permission(self, request: Request, view: object) -> bool:
        return request_agent(request) is None or request.method in permissions.SAFE_METHODS


class OwnerOnly(permissions.BasePermission):
    """Owner-private reads (the consent audit trail) are closed to agent tokens."""

    message = "Agent tokens cannot read this: it is visible to the owner only."

    def has_permission(self, request: Request, view: object) -> bool:
        return request_agent(request) is None


class AgentTokensNotFound(permissions.BasePermission):
    """For what exists only between people (linking, a person's own consents): agent tokens get 404."""

    def has_permission(self, request: Request, view: object) -> bool:
        if request_agent(request) is not None:
            raise exceptions.NotFound()
        return True


class SessionOnly(permissions.BasePermission):
    """Tokens are managed from a signed-in browser session, never with a token."""

    message = "Tokens can only be managed from a signed-in session, not with a bearer token."

    def has_permission(self, request: Request, view: object) -> bool:
        return not isinstance(request.auth, AccessToken)
