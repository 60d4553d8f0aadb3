"""The MCP server, driven over both transports with the official SDK's own client.

Streamable HTTP goes to `/mcp/` on pytest-django's live server (the same Django view
`runserver` and gunicorn serve); stdio spawns `python manage.py mcp` pointed at the
test database. Alice's journal: Carol has consented, Bob is pending, Dave revoked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import pytest
from django.db import connection
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from accounts.models import TokenKind
from accounts.services import access_token_create, access_token_revoke
from agents.models import AccessLog, AccessSurface, Agent
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "search_memories",
    "get_person",
    "timeline_window",
    "privacy_audit",
    "memory_propose",
    "consent_request",
}


# --- the world ----------------------------------------------------------------------
@dataclass
class World:
    owner: Any
    agent: Agent
    agent_token: str
    owner_token: str
    carol_memory: Any
    solo_memory: Any
    bob_memory: Any
    dave_memory: Any
    mixed_memory: Any

    @property
    def visible_ids(self) -> set[str]:
        return {str(self.carol_memory.pk), str(self.solo_memory.pk)}

    @property
    def hidden(self) -> list[Any]:
        return [self.bob_memory, self.dave_memory, self.mixed_memory]


def _day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def world(alice) -> World:
    carol = person_create(
        owner=alice, display_name="Carol", aliases=["Caz"], notes="Neighbour; loves tulips."
    )
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    bob = person_create(owner=alice, display_name="Bob", aliases=["Bobby"], notes="Private note about Bob.")
    dave = person_create(owner=alice, display_name="Dave")
    person_set_consent(person=dave, status=ConsentStatus.GRANTED, actor=alice)
    person_set_consent(person=dave, status=ConsentStatus.REVOKED, actor=alice)

    def remember(title: str, body: str, day: str, *people) -> Any:
        return memory_create(
            owner=alice,
            title=title,
            body=body,
            occurred_at=_day(day),
            kind="knowledge",
            participants=[ParticipantSpec(person=person) for person in people],
        )

    agent = Agent.objects.get(owner=alice, name="Caregiver")
    _token, agent_token = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=agent)
    _token, owner_token = access_token_create(owner=alice, kind=TokenKind.OWNER)
    return World(
        owner=alice,
        agent=agent,
        agent_token=agent_token,
        owner_token=owner_token,
        carol_memory=remember("Tulips", "Carol planted red tulips by the garden gate.", "2024-03-05", carol),
        solo_memory=remember("Dawn walk", "I walked to the garden at dawn, alone.", "2024-03-01"),
        bob_memory=remember("Chess", "Bob's garden chess secret: he hides his queen.", "2024-03-03", bob),
        dave_memory=remember("Dave's news", "Dave told me about his garden surgery.", "2024-03-04", dave),
        mixed_memory=remember("Picnic", "Carol and Bob argued in the garden.", "2024-03-02", carol, bob),
    )


# --- connecting with the SDK client ---------------------------------------------------------
Session = Callable[[Client], Awaitable[Any]]


def _stdio_environment(token: str | None) -> dict[str, str]:
    """The variables `manage.py mcp` needs to reach this test database."""
    database = connection.settings_dict["NAME"]
    env = {"KEEPSAKE_DATABASE_NAME": database, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for passed_through in ("KEEPSAKE_DATA_DIR", "DJANGO_SETTINGS_MODULE"):
        if passed_through in os.environ:
            env[passed_through] = os.environ[passed_through]
    if os.environ.get("DATABASE_URL"):
        env["DATABASE_URL"] = urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{database}"))
    if token is not None:
        env["KEEPSAKE_TOKEN"] = token
    return env


@dataclass
class Transport:
    name: str
    live_server_url: str

    @asynccontextmanager
    async def connect(self, token: str | None, *, mode: str = "auto"):
        if self.name == "http":
            headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
            async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
                url = f"{self.live_server_url}/mcp/"
                async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                    yield client
        else:
            parameters = StdioServerParameters(
                command=sys.executable, args=["manage.py", "mcp"], env=_stdio_environment(token), cwd=ROOT
            )
            with tempfile.TemporaryFile("w+") as errlog:
                try:
                    async with Client(parameters, mode=mode) as client:
                        yield client
                except BaseException:
                    errlog.seek(0)
                    sys.stderr.write(errlog.read())
                    raise

    def session(self, token: str | None, work: Session, *, mode: str = "auto") -> Any:
        async def main() -> Any:
            async with self.connect(token, mode=mode) as client:
                return await work(client)

        return anyio.run(main)


@pytest.fixture(params=["http", "stdio"])
def transport(request, live_server) -> Transport:
    return Transport(name=request.param, live_server_url=live_server.url)


def _payload(result) -> dict:
    assert not result.is_error, result.content
    payload = json.loads(result.content[0].text)
    assert result.structured_content == payload
    return payload


def _error(result) -> str:
    assert result.is_error
    return result.content[0].text


def _mcp_log(world: World) -> list[tuple[str, str, str]]:
    return sorted(
        (str(row.memory_id), row.surface, row.agent_id and str(row.agent_id))
        for row in AccessLog.objects.filter(owner=world.owner)
    )


# --- tools over both transports -------------------------------------------------------------
def test_tools_are_listed_with_their_arguments(transport, world):
    async def work(client: Client):
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = transport.session(world.agent_token, work)
    assert set(tools) == TOOLS
    assert tools["search_memories"].input_schema["required"] == ["query"]
    assert tools["timeline_window"].input_schema["required"] == ["start", "end"]
    assert tools["privacy_audit"].annotations.read_only_hint is True
    # The proposals suggest to the owner; they change no memory and no consent.
    assert tools["memory_propose"].annotations.read_only_hint is False
    assert tools["memory_propose"].annotations.destructive_hint is False
    assert tools["consent_request"].input_schema["required"] == ["person_name"]


def test_search_returns_only_consented_memories_and_logs_each_one(transport, world):
    async def work(client: Client):
        return _payload(await client.call_tool("search_memories", {"query": "garden", "limit": 10}))

    results = transport.session(world.agent_token, work)["results"]
    assert {result["id"] for result in results} == world.visible_ids
    text = json.dumps(results)
    for hidden in ("Bob", "Dave", "queen", "surgery", "argued"):
        assert hidden not in text
    agent_id = str(world.agent.pk)
    assert _mcp_log(world) == sorted(
        (memory_id, AccessSurface.MCP, agent_id) for memory_id in world.visible_ids
    )


def test_get_person_answers_for_someone_without_consent_exactly_as_for_no_one(transport, world):
    async def work(client: Client):
        names = ["bobby", "Bob", "Dave", "Bobb", "caz", "Zed"]
        return {name: await client.call_tool("get_person", {"name": name}) for name in names}

    results = transport.session(world.agent_token, work)
    (carol,) = _payload(results.pop("caz"))["people"]
    assert (carol["name"], carol["consent"], carol["notes"]) == (
        "Carol",
        "granted",
        "Neighbour; loves tulips.",
    )
    # The picnic has Carol in it but also Bob, who has not consented: it stays hidden.
    assert [memory["id"] for memory in carol["memories"]] == [str(world.carol_memory.pk)]
    assert carol["memory_count"] == 1
    # Pending, revoked, a fragment of a hidden alias, and no one: one answer, bar the name asked.
    errors = {name: _error(result).replace(repr(name), "NAME") for name, result in results.items()}
    assert len(set(errors.values())) == 1, errors
    assert "No one called 'Zed'" in _error(results["Zed"])
    assert not [word for word in ("Bob", "Dave", "Private note") if word in json.dumps(list(errors.values()))]
    assert _mcp_log(world) == [(str(world.carol_memory.pk), AccessSurface.MCP, str(world.agent.pk))]


def test_timeline_window_is_chronological_and_gated(transport, world):
    async def work(client: Client):
        whole = _payload(
            await client.call_tool("timeline_window", {"start": "2024-03-01", "end": "2024-03-31"})
        )
        first = _payload(
            await client.call_tool(
                "timeline_window", {"start": "2024-03-01", "end": "2024-03-31", "limit": 1}
            )
        )
        empty = _payload(
            await client.call_tool("timeline_window", {"start": "2024-03-02", "end": "2024-03-04"})
        )
        return whole, first, empty

    whole, first, empty = transport.session(world.agent_token, work)
    assert [memory["title"] for memory in whole["memories"]] == ["Dawn walk", "Tulips"]
    assert whole["truncated"] is False
    assert [memory["title"] for memory in first["memories"]] == ["Dawn walk"]
    assert first["truncated"] is True
    # Bob's, the picnic and Dave's all fall in this window: an agent sees nothing, and no hint.
    assert empty == {"start": "2024-03-02", "end": "2024-03-04", "memories": [], "truncated": False}
    assert len(_mcp_log(world)) == 3


def test_privacy_audit_explains_visible_memories_and_hides_the_rest(transport, world):
    async def work(client: Client):
        audit = _payload(await client.call_tool("privacy_audit", {"memory_id": str(world.carol_memory.pk)}))
        hidden = [
            _error(await client.call_tool("privacy_audit", {"memory_id": str(memory.pk)}))
            for memory in world.hidden
        ]
        missing = _error(await client.call_tool("privacy_audit", {"memory_id": str(uuid.uuid4())}))
        return audit, hidden, missing

    audit, hidden, missing = transport.session(world.agent_token, work)
    assert audit["memory"]["id"] == str(world.carol_memory.pk)
    assert audit["agents"]["can_see"] is True
    assert [(p["name"], p["consent"]) for p in audit["participants"]] == [("Carol", "granted")]
    assert audit["superseded_by"] is None and audit["expires_at"] is None
    # A gated-out memory is indistinguishable from one that does not exist.
    assert hidden == [missing] * 3
    assert missing.endswith("Memory not found.")
    assert _mcp_log(world) == [(str(world.carol_memory.pk), AccessSurface.MCP, str(world.agent.pk))]


def test_bad_arguments_are_tool_errors_with_clear_messages(transport, world):
    async def work(client: Client):
        return [
            _error(await client.call_tool(name, arguments))
            for name, arguments in [
                ("search_memories", {"query": "   "}),
                ("search_memories", {"query": "garden", "limit": 0}),
                ("search_memories", {"query": "garden", "limit": "many"}),
                ("search_memories", {}),
                ("timeline_window", {"start": "March", "end": "2024-03-31"}),
                ("timeline_window", {"start": "2024-04-01", "end": "2024-03-01"}),
                ("privacy_audit", {"memory_id": "not-a-uuid"}),
                ("get_person", {"name": ""}),
            ]
        ]

    messages = transport.session(world.agent_token, work)
    assert messages[0].endswith("query must not be empty.")
    assert messages[1].endswith("limit must be a whole number from 1 to 100.")
    assert messages[2].endswith('limit must be a whole number, not "many" (text).')
    assert messages[3].endswith("Missing argument for search_memories: query.")
    assert messages[4].endswith("start must be an ISO date such as 2024-05-31, not 'March'.")
    assert messages[5].endswith("start (2024-04-01) must be on or before end (2024-03-01).")
    assert messages[6].endswith("memory_id must be a memory's id (a UUID), not 'not-a-uuid'.")
    assert messages[7].endswith("name must not be empty.")
    assert not AccessLog.objects.exists()


# --- authentication -------------------------------------------------------------------------
def _in_thread(work: Callable[[], Any]) -> Callable[[], Any]:
    """`work` for anyio.to_thread: the ORM from inside a running session, closing its connection."""

    def run() -> Any:
        try:
            return work()
        finally:
            connection.close()

    return run


def test_revoking_consent_or_the_token_applies_to_the_very_next_call(transport, world):
    carol = world.carol_memory.participants.get().person
    token = world.owner.access_tokens.get(kind=TokenKind.AGENT)

    async def work(client: Client):
        before = _payload(await client.call_tool("search_memories", {"query": "tulips"}))
        await anyio.to_thread.run_sync(
            _in_thread(
                lambda: person_set_consent(person=carol, status=ConsentStatus.REVOKED, actor=world.owner)
            )
        )
        after = _payload(await client.call_tool("search_memories", {"query": "tulips"}))
        await anyio.to_thread.run_sync(_in_thread(lambda: access_token_revoke(token=token)))
        try:
            return (
                before,
                after,
                await client.call_tool("timeline_window", {"start": "2024-01-01", "end": "2024-12-31"}),
            )
        except MCPError as refused:
            return before, after, refused

    before, after, refused = transport.session(world.agent_token, work)
    assert [result["title"] for result in before["results"]] == ["Tulips"]
    assert after["results"] == []
    if transport.name == "stdio":
        # One long-lived connection, yet the token is checked again on every call.
        assert _error(refused).endswith("Invalid or revoked token.")
    else:
        assert isinstance(refused, MCPError)
    assert _mcp_log(world) == [(str(world.carol_memory.pk), AccessSurface.MCP, str(world.agent.pk))]


# --- authentication -------------------------------------------------------------------------
@pytest.fixture
def bad_tokens(world) -> dict[str, str | None]:
    revoked_token, revoked = access_token_create(owner=world.owner, kind=TokenKind.AGENT, agent=world.agent)
    access_token_revoke(token=revoked_token)
    return {
        "missing": None,
        "malformed": "let-me-in",
        "unknown": "ks_00000000_" + "x" * 43,
        "revoked": revoked,
        "owner": world.owner_token,
    }


def test_http_refuses_missing_bad_revoked_and_owner_tokens(live_server, world, bad_tokens):
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async def connect(token: str | None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [record]}) as http:
            async with Client(streamable_http_client(f"{live_server.url}/mcp/", http_client=http)) as client:
                await client.list_tools()

    for token in bad_tokens.values():
        statuses.clear()
        with pytest.raises(BaseExceptionGroup) as refused:
            anyio.run(connect, token)
        assert refused.group_contains(MCPError)
        # mode="auto" probes server/discover, then falls back to initialize: both refused.
        assert statuses and set(statuses) == {401}


def test_http_401_says_why(client, world, bad_tokens):
    expected = {
        "missing": "No access token given",
        "malformed": "Invalid or revoked token.",
        "unknown": "Invalid or revoked token.",
        "revoked": "Invalid or revoked token.",
        "owner": "Owner tokens are not accepted",
    }
    for case, token in bad_tokens.items():
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
        response = client.post("/mcp/", data="{}", content_type="application/json", **headers)
        assert response.status_code == 401, case
        assert response.json()["error"] == "invalid_token"
        assert response.json()["error_description"].startswith(expected[case]), case
        assert response["WWW-Authenticate"].startswith('Bearer realm="mcp"')


def test_http_has_no_event_stream_or_sessions_to_end(client, world):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {world.agent_token}", "HTTP_ACCEPT": "text/event-stream"}
    for method in (client.get, client.delete):
        response = method("/mcp/", **headers)
        assert response.status_code == 405
        assert response["Allow"] == "POST"


def test_http_answers_malformed_requests_with_4xx_not_500(client, world):
    headers = {
        "HTTP_AUTHORIZATION": f"Bearer {world.agent_token}",
        "HTTP_ACCEPT": "application/json, text/event-stream",
    }
    not_json = client.post("/mcp/", data="{not json", content_type="application/json", **headers)
    assert not_json.status_code == 400
    assert not_json.json()["error"]["code"] == -32700  # JSON-RPC parse error
    not_rpc = client.post(
        "/mcp/", data=json.dumps({"hello": "world"}), content_type="application/json", **headers
    )
    assert 400 <= not_rpc.status_code < 500
    wrong_type = client.post("/mcp/", data="hello", content_type="text/plain", **headers)
    assert 400 <= wrong_type.status_code < 500


def test_stdio_exits_with_a_clear_message_on_bad_tokens(transactional_db, world, bad_tokens):
    expected = {
        "missing": "KEEPSAKE_TOKEN: No access token given",
        "malformed": "KEEPSAKE_TOKEN: Invalid or revoked token.",
        "unknown": "KEEPSAKE_TOKEN: Invalid or revoked token.",
        "revoked": "KEEPSAKE_TOKEN: Invalid or revoked token.",
        "owner": "KEEPSAKE_TOKEN: Owner tokens are not accepted",
    }
    base = {name: value for name, value in os.environ.items() if name != "KEEPSAKE_TOKEN"}
    for case, token in bad_tokens.items():
        finished = subprocess.run(
            [sys.executable, "manage.py", "mcp"],
            cwd=ROOT,
            env=base | _stdio_environment(token),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert finished.returncode == 1, case
        assert f"CommandError: {expected[case]}" in finished.stderr, (case, finished.stderr)
        assert finished.stdout == ""


def test_stdio_client_cannot_connect_with_a_revoked_token(transactional_db, world, bad_tokens):
    transport = Transport(name="stdio", live_server_url="")

    async def work(client: Client):
        return await client.list_tools()

    with pytest.raises(BaseException) as refused:
        transport.session(bad_tokens["revoked"], work)
    assert isinstance(refused.value, MCPError | BaseExceptionGroup), refused.value


def test_the_mcp_lists_leave_the_vectors_in_the_database(world):
    from datetime import date

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents.mcpserver.selectors import mcp_person_memories, mcp_timeline_window

    carol = world.carol_memory.participants.get().person
    with CaptureQueriesContext(connection) as queries:
        theirs, count = mcp_person_memories(owner=world.owner, person=carol, limit=10)
        window, more = mcp_timeline_window(
            owner=world.owner, start=date(2024, 3, 1), end=date(2024, 3, 31), limit=10
        )
    assert [memory.pk for memory in theirs] == [world.carol_memory.pk] and count == 1
    assert {memory.pk for memory in window} == {world.carol_memory.pk, world.solo_memory.pk} and not more
    reads = [query["sql"] for query in queries if 'FROM "memories_memory"' in query["sql"]]
    assert reads and not any('"memories_memory"."embedding"' in sql for sql in reads)
