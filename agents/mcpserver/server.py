"""The MCP server: consent-gated tools, served over stdio or Streamable HTTP.

One `MCPServer` (the official SDK) serves both transports. Who is calling travels in
a context variable (`McpCall`) set by the transport: the stdio command sets it once for
the process, the HTTP view once per request. Each tool call re-authenticates that
token, so revoking it takes effect on the very next call even on a long-lived stdio
connection, and runs the transport-free code in `agents.mcpserver.tools` on Django's
thread for the ORM (`sync_to_async(thread_sensitive=True)`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from agents.mcpserver import tools
from agents.mcpserver.auth import McpAuthError, mcp_token_authenticate
from memories.retrieval import MAX_LIMIT

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Keepsake is the user's personal memory journal. These tools read it on behalf of one of the "
    "user's agents, and only ever return memories that every person in them has consented to share "
    "with agents. People who have not consented are unknown to these tools: looking one up answers "
    "exactly as for a name nobody has, so do not guess or draw conclusions about anyone you are not "
    "shown. Every memory you receive is recorded in the journal's access log. You never write to the "
    "journal: memory_propose and consent_request only suggest, and the owner decides in the app."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
# Proposals add a suggestion for the owner; they change no memory and no consent.
SUGGESTS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


@dataclass(frozen=True)
class McpCall:
    """Who is calling, as the transport learned it."""

    raw_token: str | None
    # The stdio server is one long-lived process with no request cycle to close stale or
    # broken database connections, so each call does it; under the web server Django does.
    manage_connections: bool = False


_current_call: ContextVar[McpCall | None] = ContextVar("keepsake_mcp_call", default=None)


@contextmanager
def mcp_call(call: McpCall) -> Iterator[None]:
    """Run the enclosed MCP serving on behalf of `call` (tasks started inside inherit it)."""
    reset = _current_call.set(call)
    try:
        yield
    finally:
        _current_call.reset(reset)


def _run_tool(tool: Callable[..., dict[str, Any]], arguments: dict[str, Any]) -> dict[str, Any]:
    call = _current_call.get()
    if call is None:
        raise ToolError("No caller: the MCP server was started without a token.")
    if call.manage_connections:
        close_old_connections()
    try:
        token = mcp_token_authenticate(raw_token=call.raw_token)
        return tool(token=token, **arguments)
    except (McpAuthError, tools.ToolInputError) as exc:
        raise ToolError(str(exc)) from exc
    finally:
        if call.manage_connections:
            close_old_connections()


async def _call_tool(tool: Callable[..., dict[str, Any]], **arguments: Any) -> dict[str, Any]:
    # thread_sensitive: under the HTTP view this runs on the request's own thread (and
    # its database connection); under stdio on asgiref's single shared sync thread.
    return await sync_to_async(_run_tool, thread_sensitive=True)(tool, arguments)


def _describe(value: Any) -> str:
    """How a refused argument's value is named in the error: its JSON, and its JSON type."""
    kind = (
        "a boolean"
        if isinstance(value, bool)
        else "a number"
        if isinstance(value, int | float)
        else "text"
        if isinstance(value, str)
        else "a list"
        if isinstance(value, list)
        else "an object"
        if isinstance(value, dict)
        else "null"
    )
    shown = json.dumps(value, default=str)
    return f"{shown[:40]}{'…' if len(shown) > 40 else ''} ({kind})"


def _json_type_matches(value: Any, schema: dict[str, Any]) -> bool:
    """Whether `value` has the JSON type the tool's input schema declares; never coerces.

    Only the types these tools use: a boolean is not a number, a number is not text,
    text is not a number (pydantic's lax mode would take `true` and `"10"` as 1 and 10).
    """
    if "anyOf" in schema:
        return any(_json_type_matches(value, option) for option in schema["anyOf"])
    expected = schema.get("type")
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "string":
        return isinstance(value, str)
    if expected == "null":
        return value is None
    if expected == "array":
        items = schema.get("items", {})
        return isinstance(value, list) and all(_json_type_matches(item, items) for item in value)
    return expected is None


_TYPE_WORDS = {"integer": "a whole number", "string": "text", "array": "a list of text", "null": "null"}


def _expected_words(schema: dict[str, Any]) -> str:
    options = schema.get("anyOf", [schema])
    return " or ".join(_TYPE_WORDS.get(option.get("type", ""), "a value") for option in options)


def check_tool_arguments(name: str, parameters: dict[str, Any], arguments: dict[str, Any]) -> None:
    """Refuse unknown, missing or wrongly typed arguments with a message that says which and why.

    As the REST API does (config.api_inputs: StrictBooleanField, StrictCharField): the
    caller is told, never guessed for. Checked against the input schema the tool publishes.
    """
    properties: dict[str, Any] = parameters.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        listed = ", ".join(repr(argument)[:60] for argument in unknown[:5])
        raise ToolError(
            f"Unknown argument{'s' if len(unknown) > 1 else ''} for {name}: {listed}. "
            f"It takes: {', '.join(properties)}."
        )
    missing = [argument for argument in parameters.get("required", []) if argument not in arguments]
    if missing:
        raise ToolError(f"Missing argument for {name}: {', '.join(missing)}.")
    for argument, value in arguments.items():
        schema = properties[argument]
        if not _json_type_matches(value, schema):
            raise ToolError(
                f"Invalid argument for {name}: {argument} must be {_expected_words(schema)}, "
                f"not {_describe(value)}."
            )


class StrictArgumentsServer(MCPServer):
    """MCPServer whose tools take exactly their declared arguments, of exactly their declared types."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            check_tool_arguments(name, tool.parameters, arguments or {})
        return await super().call_tool(name, arguments, context)

    def add_tool(self, *args: Any, **kwargs: Any) -> None:
        super().add_tool(*args, **kwargs)
        # Say so in the published schema too: clients that validate before sending learn it there.
        for tool in self._tool_manager.list_tools():
            tool.parameters["additionalProperties"] = False


server: MCPServer = StrictArgumentsServer("keepsake", title="Keepsake", instructions=INSTRUCTIONS)

Limit = Annotated[
    int,
    Field(
        description=f"How many memories at most, 1 to {MAX_LIMIT}.",
        json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT},
    ),
]


CIRCLE_ARGUMENT = (
    "Optional: a circle's id. Reads what your owner may see in that circle, when the circle lets "
    "members' agents read; empty: your owner's own journal."
)


@server.tool(name="search_memories", annotations=READ_ONLY)
async def search_memories(
    query: Annotated[str, Field(description="What to look for, in plain words.")],
    limit: Limit = 10,
    circle: Annotated[str, Field(description=CIRCLE_ARGUMENT)] = "",
) -> dict[str, Any]:
    """Search the journal by meaning and by words; best matches first.

    Returns only memories everyone in them has consented to share with agents. With
    `circle`: what this agent's owner may see in that circle, when it lets members'
    agents read (each result names its owner) — memories everyone in them consented to
    share with that circle, the owner's own only if they may also reach the owner's agents.
    """
    return await _call_tool(tools.search_memories, query=query, limit=limit, circle=circle)


@server.tool(name="get_person", annotations=READ_ONLY)
async def get_person(
    name: Annotated[
        str, Field(description="The person's (or pet's) whole name or one of their aliases, in any case.")
    ],
) -> dict[str, Any]:
    """Look someone up by name: who they are, the owner's notes and their recent memories.

    Only people who have consented to share with agents are found; anyone else gets the
    same "No one called ..." answer as a name nobody has.
    """
    return await _call_tool(tools.get_person, name=name)


@server.tool(name="timeline_window", annotations=READ_ONLY)
async def timeline_window(
    start: Annotated[str, Field(description="First day, an ISO date such as 2024-05-01.")],
    end: Annotated[str, Field(description="Last day (included), an ISO date such as 2024-05-31.")],
    limit: Limit = tools.TIMELINE_DEFAULT_LIMIT,
    circle: Annotated[str, Field(description=CIRCLE_ARGUMENT)] = "",
) -> dict[str, Any]:
    """The memories that happened between two dates, oldest first.

    `truncated` is true when more memories fall in the window than `limit`: narrow it.
    With `circle`: in that circle instead of the owner's journal (as search_memories).
    """
    return await _call_tool(tools.timeline_window, start=start, end=end, limit=limit, circle=circle)


@server.tool(name="privacy_audit", annotations=READ_ONLY)
async def privacy_audit(
    memory_id: Annotated[str, Field(description="The memory's id, as returned by the other tools.")],
) -> dict[str, Any]:
    """Who can see this memory and why: each person's consent, expiry, replacement, and each circle
    it is shared into, member by member. Only for memories you may see yourself."""
    return await _call_tool(tools.privacy_audit, memory_id=memory_id)


@server.tool(name="memory_propose", annotations=SUGGESTS)
async def memory_propose(
    text: Annotated[str, Field(description="What to remember, as one memory, in plain words.")],
    from_memories: Annotated[
        list[str] | None,
        Field(
            description="For an insight: the ids of the memories it generalises. It must name no one "
            "in them; dates, places and unique details are flagged for the owner."
        ),
    ] = None,
) -> dict[str, Any]:
    """Propose a memory for the owner to keep. Nothing is saved until the owner confirms it in Keepsake.

    With `from_memories`, propose a shareable insight generalised from those memories
    (kind knowledge, nobody in it). The answer only says it is waiting for the owner.
    """
    return await _call_tool(tools.memory_propose, text=text, from_memories=from_memories)


@server.tool(name="consent_request", annotations=SUGGESTS)
async def consent_request(
    person_name: Annotated[str, Field(description="The person's whole name or alias.")],
    reason: Annotated[str, Field(description="Why you need their consent (for the owner only).")] = "",
) -> dict[str, Any]:
    """Ask the owner to seek someone's consent so you may use memories with them.

    The answer is the same whoever the name belongs to, or if it belongs to no one:
    you will not learn whether they exist or what the owner decides.
    """
    return await _call_tool(tools.consent_request, person_name=person_name, reason=reason)


def serve_stdio(*, raw_token: str) -> None:
    """Serve MCP on stdin/stdout until the client closes it."""
    with mcp_call(McpCall(raw_token=raw_token, manage_connections=True)):
        anyio.run(server.run_stdio_async)
