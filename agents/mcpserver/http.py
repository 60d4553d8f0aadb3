"""Streamable HTTP at `/mcp/`, as an ordinary Django view.

Keepsake runs Django over WSGI (runserver in development, gunicorn in production),
while the SDK's Streamable HTTP transport is an ASGI application. Rather than switch
the whole site to an ASGI server, this view serves the transport's *stateless,
JSON-response* mode, which needs no long-lived connection: each POST carries one
JSON-RPC message and gets one JSON answer. For each request it hands the request to
a fresh `StreamableHTTPSessionManager` (stateless, so nothing outlives the request and
any worker may serve any request) on an event loop of its own via `async_to_sync`,
and returns what the SDK answered.

Authentication and the refusal of GET/DELETE happen before this module is imported
(`agents.mcpserver.views`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from agents.mcpserver.server import McpCall, mcp_call, server

# A manager per request would log "started" and "shutting down" at INFO on every call.
logging.getLogger("mcp.server.streamable_http_manager").setLevel(logging.WARNING)


def _asgi_scope(request: HttpRequest) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        # WSGI already decoded header values as latin-1: this restores the bytes.
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.items()
        ],
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
        "server": (request.get_host(), int(request.get_port())),
    }


async def _serve(
    scope: dict[str, Any], body: bytes, call: McpCall
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []
    body_sent = False

    async def receive() -> dict[str, Any]:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        # Like a real server: nothing more until the client goes away, which here it never does
        # before the response is complete (the task is cancelled when serving ends).
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    # Stateless: a fresh manager per request, so nothing is shared between requests,
    # threads or event loops, and no session state needs sticky routing between workers.
    # MCPServer has no public accessor for its low-level server (the SDK's own in-process
    # Client reaches it the same way); the MCP tests would catch a rename.
    manager = StreamableHTTPSessionManager(app=server._lowlevel_server, json_response=True, stateless=True)
    with mcp_call(call):
        async with manager.run():
            await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)


def _json_rpc_error(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes | None:
    """The SDK's plain-text refusal (a missing Content-Type, say) as JSON-RPC; None when already JSON."""
    content_type = dict(headers).get(b"content-type", b"")
    if status < 400 or content_type.startswith(b"application/json"):
        return None
    message = body.decode("utf-8", "replace").strip() or "Bad request."
    # The request could not be read as JSON-RPC, so the answer has no id.
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}).encode()


def mcp_http_response(request: HttpRequest, *, raw_token: str) -> HttpResponse:
    """The SDK's answer to an authenticated MCP POST, as a Django response (errors always JSON)."""
    status, headers, body = async_to_sync(_serve)(
        _asgi_scope(request), request.body, McpCall(raw_token=raw_token)
    )
    error = _json_rpc_error(status, headers, body)
    if error is not None:
        return HttpResponse(error, status=status, content_type="application/json")
    response = HttpResponse(body, status=status)
    for name, value in headers:
        response[name.decode("latin-1")] = value.decode("latin-1")
    return response
