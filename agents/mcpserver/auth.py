"""Who is calling: an active agent token, or a clear refusal."""

from __future__ import annotations

from accounts.models import AccessToken
from accounts.services import access_token_authenticate

CREATE_TOKEN_HELP = "Create one with: python manage.py create_token <username> --kind agent --agent Caregiver"


class McpAuthError(Exception):
    """The caller may not use the MCP server; the message says why and what to do."""


def mcp_token_authenticate(*, raw_token: str | None) -> AccessToken:
    """The active agent token `raw_token` names, or McpAuthError.

    Owner tokens are refused on purpose: MCP is an agent surface, always consent-gated,
    and an owner token would otherwise have to choose between acting as the owner (the
    whole journal, ungated, handed to whatever client holds it) and silently pretending
    to be an agent. The owner has the web pages and the API for that.
    """
    if raw_token is None or not raw_token.strip():
        raise McpAuthError(f"No access token given: the MCP server needs an agent token. {CREATE_TOKEN_HELP}")
    token = access_token_authenticate(raw_token=raw_token)
    if token is None:
        raise McpAuthError("Invalid or revoked token.")
    if not token.is_agent:
        raise McpAuthError(
            "Owner tokens are not accepted: the MCP server is an agent surface and only takes agent "
            f"tokens, which always read through the consent gate. {CREATE_TOKEN_HELP}"
        )
    return token
