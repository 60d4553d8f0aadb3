"""The `/mcp/` endpoint: authenticate, then let the SDK answer (agents.mcpserver.http)."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from accounts import ratelimits
from agents.mcpserver.auth import McpAuthError, mcp_token_authenticate


def _bearer_token(request: HttpRequest) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    return credentials.strip()


def _unauthorized(message: str) -> JsonResponse:
    # RFC 6750 shape, which MCP clients (and the SDK's own auth middleware) speak.
    challenge = f'Bearer realm="mcp", error="invalid_token", error_description={json.dumps(message)}'
    return JsonResponse(
        {"error": "invalid_token", "error_description": message},
        status=401,
        headers={"WWW-Authenticate": challenge},
    )


def _too_many_requests(limited: ratelimits.TokenAttemptsLimited) -> JsonResponse:
    retry_after = limited.limited.retry_after
    return JsonResponse(
        {"error": "too_many_requests", "error_description": limited.message, "retry_after": retry_after},
        status=429,
        headers={"Retry-After": str(retry_after)},
    )


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """Streamable HTTP, stateless and JSON-only: POST one JSON-RPC message, get one answer.

    GET (a server-to-client event stream) and DELETE (ending a session) have nothing to
    serve without sessions; they answer 405, as the MCP specification allows, so no
    request ever holds a worker open.
    """
    raw_token = _bearer_token(request)
    try:
        # The same limits as the API's tokens (accounts.ratelimits): a refused token counts
        # against its address (429 past the limit), an accepted one against its owner's
        # ceiling. The token is read first, so a valid one always works.
        try:
            token = mcp_token_authenticate(raw_token=raw_token)
        except McpAuthError as exc:
            if raw_token is not None:
                ratelimits.token_failure_record(request)
            return _unauthorized(str(exc))
        ratelimits.token_request_record(request, owner_id=token.owner_id)
    except ratelimits.TokenAttemptsLimited as limited:
        return _too_many_requests(limited)
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "POST"})
    # Imported here: the SDK takes a second or two to import, which every process that
    # loads the URLconf (web, worker, manage.py commands, tests) would otherwise pay.
    from agents.mcpserver.http import mcp_http_response

    return mcp_http_response(request, raw_token=raw_token)
