"""The `/mcp/` endpoint: authenticate, then let the SDK answer (agents.mcpserver.http)."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

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


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """Streamable HTTP, stateless and JSON-only: POST one JSON-RPC message, get one answer.

    GET (a server-to-client event stream) and DELETE (ending a session) have nothing to
    serve without sessions; they answer 405, as the MCP specification allows, so no
    request ever holds a worker open.
    """
    raw_token = _bearer_token(request)
    try:
        mcp_token_authenticate(raw_token=raw_token)
    except McpAuthError as exc:
        return _unauthorized(str(exc))
    if request.method != "POST":
        return HttpResponse(status=405, headers={"Allow": "POST"})
    # Imported here: the SDK takes a second or two to import, which every process that
    # loads the URLconf (web, worker, manage.py commands, tests) would otherwise pay.
    from agents.mcpserver.http import mcp_http_response

    return mcp_http_response(request, raw_token=raw_token)
