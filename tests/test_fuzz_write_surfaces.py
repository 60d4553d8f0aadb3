"""Fuzz every write surface: hostile input is a clear 4xx (JSON on /api/ and /mcp/) and changes nothing.

From the hardening issue ("Prove it": a fuzz test over every write surface). Hypothesis
draws dates at the edges (year 1, 9999, past 9999, offsets that overflow), huge and
deeply nested JSON, NUL bytes and lone surrogates, wrong types (numbers, booleans,
lists where text is expected, 1e999), and huge counts (formset TOTAL_FORMS, offsets,
limits), and sends them to:

- the REST API (config/api_urls.py) with an owner token and an agent token (tokens/
  with a signed-in session too, as it is managed from the web);
- the web forms (memory, person, consent, circle, circle memory, invite and agent forms;
  the timeline, search and circle pages' query strings; the import upload);
- the MCP server's tools over `/mcp/` (JSON-RPC), and malformed JSON-RPC envelopes.

Every request is checked the same way: no 5xx; on /api/ and /mcp/ any body is JSON;
and when the answer is a refusal (4xx, or a web form shown again with its errors)
every project table is exactly as it was before (a digest of every row, so a changed
value counts as much as a new or missing row). MCP tool crashes are caught by the
SDK and answered as a bare "Error executing tool <name>": that counts as a 500 here.

Each surface runs a few examples (max_examples small, no deadline) so the whole file
stays around a minute or two; HYPOTHESIS_PROFILE=thorough runs many more.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import Agent
from circles.agent import circle_conversation
from circles.services import circle_create, invite_create
from linked.services import person_link_accept, person_link_invite_create
from memories.models import EMBEDDING_DIMENSIONS
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent
from tests.agents.conftest import llm_stub  # noqa: F401  (the chat answers from the local stub LLM)

PROJECT_APPS = {"accounts", "agents", "circles", "memories", "people", "portability", "inbox", "insights"}
# Columns that legitimately move on any authenticated request, refused or not.
VOLATILE_COLUMNS = ("last_used_at",)
FUZZ = settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- what "nothing changed" means -----------------------------------------------------------


def _tables() -> list[str]:
    models = [model for model in apps.get_models() if model._meta.app_label in PROJECT_APPS]
    models.append(apps.get_model("auth", "User"))
    return sorted({model._meta.db_table for model in models})


def snapshot() -> dict[str, tuple[int, str]]:
    """Every project table's row count and a digest of all its rows (volatile columns left out)."""
    drop = "".join(f" - '{column}'" for column in VOLATILE_COLUMNS)
    parts = [
        f"SELECT '{table}', count(*), md5(coalesce(string_agg(row_text, '|' ORDER BY row_text), '')) "
        f'FROM (SELECT (to_jsonb(t){drop})::text AS row_text FROM "{table}" t) rows'
        for table in _tables()
    ]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts))
        return {table: (count, digest) for table, count, digest in cursor.fetchall()}


def changed_tables(before: dict, after: dict) -> list[str]:
    return [table for table in before if before[table] != after[table]]


# --- the world ----------------------------------------------------------------------------


@dataclass
class World:
    alice: Any
    mallory: Any
    bob: Person
    carol: Person
    memory: Any
    circle: Any
    caregiver: Agent
    owner_token: str
    agent_token: str
    spare_token_id: uuid.UUID
    alice_in_mallorys_journal: Person
    bob_link_token: str
    mallory_invite_token: str
    session: Client

    def token(self, kind: str) -> str:
        return self.owner_token if kind == "owner" else self.agent_token


def _stand_in_embedding(text: str) -> list[float]:
    return [1.0] + [0.0] * (EMBEDDING_DIMENSIONS - 1)


@pytest.fixture
def world(alice, mallory, llm_stub, monkeypatch) -> World:  # noqa: F811
    # Searches embed their query with the real model, a minute to load and a second a query
    # on a busy CPU; what a query means changes no refusal, so a fixed stand-in keeps the run
    # short (as in tests/agents/test_side_channels.py). Text still reaches the stand-in only
    # after every check in front of the model.
    monkeypatch.setattr("memories.embeddings.embed_text", _stand_in_embedding)
    bob = person_create(owner=alice, display_name="Bob", aliases=["Bobby"], notes="Pending.")
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    memory = memory_create(
        owner=alice,
        title="Chess",
        body="Bob taught me chess in the park.",
        kind="knowledge",
        participants=[ParticipantSpec(person=bob)],
    )
    circle = circle_create(owner=alice, name="Family")
    # Opened once, as the chat page does: the conversations exist before any message is fuzzed.
    for private in (False, True):
        circle_conversation(circle=circle, user=alice, private=private)
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")
    _, owner_token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="scripts")
    _, agent_token = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=caregiver)
    spare, _ = access_token_create(owner=alice, kind=TokenKind.OWNER, name="spare")
    # Mallory writes about Alice and Alice links herself: me/consents/ has something to decide.
    about_alice = person_create(owner=mallory, display_name="Alice")
    _, mallory_link = person_link_invite_create(person=about_alice, by=mallory)
    person_link_accept(token=mallory_link, user=alice)
    _, bob_link_token = person_link_invite_create(person=bob, by=alice)
    mallory_circle = circle_create(owner=mallory, name="Mallory's friends")
    session = Client()
    session.force_login(alice)
    return World(
        alice=alice,
        mallory=mallory,
        bob=bob,
        carol=carol,
        memory=memory,
        circle=circle,
        caregiver=caregiver,
        owner_token=owner_token,
        agent_token=agent_token,
        spare_token_id=spare.pk,
        alice_in_mallorys_journal=about_alice,
        bob_link_token=bob_link_token,
        mallory_invite_token=invite_create(circle=mallory_circle, by=mallory).token,
        session=session,
    )


# --- hostile values -----------------------------------------------------------------------------

EDGE_DATES = [
    "0001-01-01",
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00-14:00",
    "0001-01-01 00:00",
    "9999-12-31",
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:59:59.999999-14:00",
    "9999-12-31T23:59:59+14:00",
    "9999-12-31 23:59",
    "10000-01-01",
    "+10000-01-01T00:00:00Z",
    "-0001-01-01",
    "0000-00-00",
    "2024-02-30",
    "2024-13-01T00:00:00Z",
    "2024-01-01T24:00:00",
    "2024-01-01T00:00:00+99:00",
    "2024-06-01\x00",
    "9223372036854775808",
    "1e999",
]
HOSTILE_TEXT = [
    "",
    " ",
    "\x00",
    "Tea\x00time",
    "\ud800",
    "lone \udfff surrogate",
    "\u202e\u200b",
    "😀" * 20,
    "x" * 60_001,
    "é" * 10_001,
    "%00",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "Infinity",
    "NaN",
    "1e999",
    "true",
    "[]",
    "{}",
    "null",
]
HUGE_COUNTS = [
    2**63,
    2**63 - 1,
    2**64,
    -(2**63) - 1,
    10**100,
    -1,
    0,
    99_999_999,
    1e308,
    -0.0,
    0.5,
]


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


text_values = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40))
wrong_types = st.one_of(
    st.sampled_from(HUGE_COUNTS),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
structures = st.one_of(
    st.sampled_from([10, 31, 33, 200]).map(_nested),
    st.just(list(range(30_000))),
    st.just({str(i): i for i in range(5_000)}),
)
any_value = st.one_of(text_values, wrong_types, st.sampled_from(EDGE_DATES), structures)

# Whole bodies no serializer should ever see (raw bytes, not JSON objects).
RAW_JSON_BODIES = [
    b"",
    b"null",
    b"[]",
    b'"text"',
    b"12",
    b"{",
    b'{"body": 1e999, "message": 1e999, "name": 1e999, "display_name": 1e999}',
    b'{"body": NaN, "name": Infinity}',
    b'{"body": "\\u0000", "name": "\\ud800", "display_name": "\\udfff", "message": "\\u0000"}',
    b"\xff\xfe\x00{",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    b'{"body": "' + b"x" * 3_000_000 + b'"}',
]


def field_values(valid: list[Any]) -> st.SearchStrategy:
    """Mostly hostile, sometimes valid: a valid neighbour lets a hostile field reach its own check."""
    return st.one_of(st.sampled_from(valid), any_value) if valid else any_value


def json_body(fields: dict[str, list[Any]]) -> st.SearchStrategy[bytes]:
    objects = st.fixed_dictionaries(
        {}, optional={name: field_values(valid) for name, valid in fields.items()}
    ).map(lambda body: json.dumps(body).encode())
    return st.one_of(objects, objects, objects, st.sampled_from(RAW_JSON_BODIES))


# --- checks ------------------------------------------------------------------------------------


def _is_json(response) -> bool:
    if not response["Content-Type"].startswith("application/json"):
        return False
    json.loads(response.content)
    return True


def send(make_request: Callable[[], Any], *, refused: Callable[[Any], bool], json_errors: bool):
    """One request, checked: no 5xx, JSON when asked, nothing changed when refused."""
    before = snapshot()
    # A savepoint: an exception rolls this request back cleanly, so it is reported
    # as itself rather than as "current transaction is aborted" on the next example.
    with transaction.atomic():
        response = make_request()
    assert response.status_code < 500, response.content[:500]
    if json_errors and response.status_code >= 400:
        assert _is_json(response), (response.status_code, response["Content-Type"], response.content[:300])
    if json_errors and response.status_code < 400 and response.content:
        assert _is_json(response), response.content[:300]
    if refused(response):
        after = snapshot()
        assert not changed_tables(before, after), (response.status_code, changed_tables(before, after))
    return response


def _api_refused(response) -> bool:
    return response.status_code >= 400


# --- the REST API ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiSurface:
    name: str
    method: str
    path: Callable[[World], str]
    fields: Callable[[World], dict[str, list[Any]]]
    callers: tuple[str, ...] = ("owner", "agent")
    # Fields that take text only: a number, boolean or list there must be refused, not coerced.
    text_fields: tuple[str, ...] = ()


def _memory_fields(w: World) -> dict[str, list[Any]]:
    return {
        "title": ["Lunch"],
        "body": ["We had lunch by the river."],
        "occurred_at": ["2024-05-01T12:00:00Z"],
        "kind": ["event", "knowledge", "task", None],
        "sensitivity": ["personal", "public", "sensitive", None],
        "source_person": [str(w.carol.pk), None],
        "participants": [[{"person": str(w.carol.pk), "role": "present"}], []],
    }


def _person_fields(w: World) -> dict[str, list[Any]]:
    return {
        "display_name": ["Dana"],
        "aliases": [["Dee"], []],
        "kind": ["human", "pet"],
        "notes": ["Neighbour."],
    }


def _consent_fields(w: World) -> dict[str, list[Any]]:
    return {"status": ["granted", "revoked", "pending"], "reason": ["Asked in person."]}


# Text fields known to coerce numbers into text (none now: the tokens' name is strict too).
KNOWN_COERCING: set[tuple[str, str]] = set()
MEMORY_TEXT = ("title", "body")
PERSON_TEXT = ("display_name", "aliases", "notes")
API_SURFACES = [
    ApiSurface(
        "memory create", "post", lambda w: "/api/v1/memories/", _memory_fields, text_fields=MEMORY_TEXT
    ),
    ApiSurface(
        "memory replace",
        "put",
        lambda w: f"/api/v1/memories/{w.memory.pk}/",
        _memory_fields,
        text_fields=MEMORY_TEXT,
    ),
    ApiSurface(
        "memory edit",
        "patch",
        lambda w: f"/api/v1/memories/{w.memory.pk}/",
        _memory_fields,
        text_fields=MEMORY_TEXT,
    ),
    ApiSurface("person create", "post", lambda w: "/api/v1/people/", _person_fields, text_fields=PERSON_TEXT),
    ApiSurface(
        "person replace",
        "put",
        lambda w: f"/api/v1/people/{w.bob.pk}/",
        _person_fields,
        text_fields=PERSON_TEXT,
    ),
    ApiSurface(
        "person edit",
        "patch",
        lambda w: f"/api/v1/people/{w.bob.pk}/",
        _person_fields,
        text_fields=PERSON_TEXT,
    ),
    ApiSurface(
        "consent",
        "post",
        lambda w: f"/api/v1/people/{w.bob.pk}/consent/",
        _consent_fields,
        text_fields=("reason",),
    ),
    ApiSurface(
        "audience consent",
        "post",
        lambda w: f"/api/v1/people/{w.bob.pk}/consents/",
        lambda w: {**_consent_fields(w), "audience": ["agents", f"circle:{w.circle.pk}", "circle:x"]},
        text_fields=("audience", "reason"),
    ),
    ApiSurface(
        "circle create",
        "post",
        lambda w: "/api/v1/circles/",
        lambda w: {"name": ["Book club"], "description": ["Thursdays."]},
        text_fields=("name", "description"),
    ),
    ApiSurface(
        "circle edit",
        "patch",
        lambda w: f"/api/v1/circles/{w.circle.pk}/",
        lambda w: {"name": ["Family"], "description": ["Everyone."]},
        text_fields=("name", "description"),
    ),
    ApiSurface(
        "circle invite",
        "post",
        lambda w: f"/api/v1/circles/{w.circle.pk}/invites/",
        lambda w: {"days": [1, 14, 30]},
    ),
    ApiSurface(
        "circle share",
        "post",
        lambda w: f"/api/v1/memories/{w.memory.pk}/shares/",
        lambda w: {"circle": [str(w.circle.pk), str(uuid.uuid4())]},
    ),
    ApiSurface(
        "invite accept", "post", lambda w: f"/api/v1/invites/{w.mallory_invite_token}/accept/", lambda w: {}
    ),
    ApiSurface("link invite", "post", lambda w: f"/api/v1/people/{w.carol.pk}/link-invite/", lambda w: {}),
    ApiSurface("link accept", "post", lambda w: f"/api/v1/links/{w.bob_link_token}/accept/", lambda w: {}),
    ApiSurface(
        "my consents",
        "post",
        lambda w: "/api/v1/me/consents/",
        lambda w: {
            "person": [str(w.alice_in_mallorys_journal.pk), str(w.bob.pk)],
            "audience": ["agents", "circle:nope", "AGENTS "],
            **_consent_fields(w),
        },
        text_fields=("audience", "reason"),
    ),
    ApiSurface(
        "chat",
        "post",
        lambda w: f"/api/v1/agents/{w.caregiver.pk}/chat/",
        lambda w: {"message": ["What did Carol plant?"], "conversation": [None, str(uuid.uuid4())]},
        text_fields=("message",),
    ),
    ApiSurface(
        "consent request",
        "post",
        lambda w: f"/api/v1/agents/{w.caregiver.pk}/consent-requests/",
        lambda w: {
            "person_name": ["Bob", "Nobody"],
            "person": [str(w.bob.pk)],
            "reason": ["To help with the chess club."],
        },
        text_fields=("person_name", "reason"),
    ),
    ApiSurface(
        "token create",
        "post",
        lambda w: "/api/v1/tokens/",
        lambda w: {"kind": ["agent", "owner"], "agent": [str(w.caregiver.pk)], "name": ["laptop"]},
        callers=("owner", "agent", "session"),
        text_fields=("name",),
    ),
    ApiSurface(
        "token revoke",
        "post",
        lambda w: f"/api/v1/tokens/{w.spare_token_id}/revoke/",
        lambda w: {},
        callers=("owner", "agent"),
    ),
]


def _api_call(world: World, caller: str, method: str, url: str, body: bytes, content_type: str):
    if caller == "session":
        client, headers = world.session, {}
    else:
        client, headers = Client(), {"Authorization": f"Bearer {world.token(caller)}"}
    return client.generic(method.upper(), url, body, content_type=content_type, headers=headers)


@pytest.mark.parametrize(
    ("surface", "caller"),
    [(surface, caller) for surface in API_SURFACES for caller in surface.callers],
    ids=lambda value: value.name if isinstance(value, ApiSurface) else value,
)
@FUZZ
@given(data=st.data())
def test_api_write_surface_refuses_hostile_input_cleanly(world, surface, caller, data) -> None:
    body = data.draw(json_body(surface.fields(world)), label="body")
    content_type = data.draw(
        st.sampled_from(["application/json"] * 6 + ["text/plain", "application/x-www-form-urlencoded"]),
        label="content_type",
    )
    url = surface.path(world)
    response = send(
        lambda: _api_call(world, caller, surface.method, url, body, content_type),
        refused=_api_refused,
        json_errors=True,
    )
    strict_fields = tuple(name for name in surface.text_fields if (surface.name, name) not in KNOWN_COERCING)
    coerced = [name for name, value in _text_values(body, strict_fields) if not isinstance(value, str)]
    assert not (coerced and response.status_code < 400), f"accepted a non-string for {coerced}"


def _text_values(body: bytes, names: tuple[str, ...]) -> list[tuple[str, Any]]:
    """(name, value) for each text field the body sets (list items too, as for aliases)."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return []
    if not isinstance(document, dict):
        return []
    values = []
    for name in names:
        value = document.get(name)
        if name == "aliases" and isinstance(value, list):
            values.extend((name, item) for item in value)
        elif value is not None:
            values.append((name, value))
    return values


# Every one of these is bad in every text field: too long for any of them, not text, or
# text PostgreSQL cannot store. Sent one field at a time (the rest valid) so that a
# field that coerces cannot hide behind a neighbour that refuses.
BAD_TEXT = ["\x00", "Tea\x00time", "\ud800", "x" * 60_001, 12345, 1e308, True, ["x"], _nested(40)]


@pytest.mark.parametrize(
    "surface",
    [surface for surface in API_SURFACES if surface.text_fields],
    ids=lambda surface: surface.name,
)
def test_api_every_text_field_refuses_every_bad_text(world, surface) -> None:
    fields = surface.fields(world)
    valid = {name: values[0] for name, values in fields.items()}
    # An agent token may write only through chat and consent requests; elsewhere it never gets this far.
    caller = "agent" if surface.name in ("chat", "consent request") else "owner"
    caller = "session" if surface.name == "token create" else caller
    url = surface.path(world)
    # The valid body is accepted (then undone): a field that coerced would be accepted too.
    with transaction.atomic():
        accepted = _api_call(
            world, caller, surface.method, url, json.dumps(valid).encode(), "application/json"
        )
        assert accepted.status_code < 400, accepted.content[:300]
        transaction.set_rollback(True)
    for name in surface.text_fields:
        for value in BAD_TEXT:
            body = json.dumps({**valid, name: [value] if name == "aliases" else value}).encode()
            response = send(
                lambda body=body: _api_call(world, caller, surface.method, url, body, "application/json"),
                refused=_api_refused,
                json_errors=True,
            )
            assert response.status_code == 400, (name, repr(value)[:40], response.content[:200])


# Reads with counts and offsets: a huge or negative number is a 400, never a 500.
API_QUERIES = [
    ("/api/v1/memories/", {"offset": [0], "limit": [5], "person": [], "kind": ["event"], "q": ["park"]}),
    ("/api/v1/memories/search/", {"q": ["park"], "limit": [5], "respect_consent": ["true"]}),
    ("memory-similar", {"limit": [5]}),
    ("circle-memories", {"q": ["", "park"], "offset": [0], "limit": [5]}),
    ("/api/v1/people/", {"offset": [0], "limit": [5]}),
]


def _query_string(pairs: list[tuple[str, Any]]) -> str:
    def encode(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value)
        return quote_plus(text, encoding="utf-8", errors="surrogatepass")

    return "&".join(f"{quote_plus(name)}={encode(value)}" for name, value in pairs)


def _query_pairs(fields: dict[str, list[Any]]) -> st.SearchStrategy[list[tuple[str, Any]]]:
    names = st.sampled_from(sorted(fields))
    return st.lists(
        names.flatmap(lambda name: st.tuples(st.just(name), field_values(fields[name]))), max_size=4
    )


@pytest.mark.parametrize("caller", ["owner", "agent"])
@pytest.mark.parametrize(("path", "fields"), API_QUERIES, ids=[path for path, _ in API_QUERIES])
@FUZZ
@given(data=st.data())
def test_api_counts_offsets_and_limits_are_4xx_when_hostile(world, path, fields, caller, data) -> None:
    path = {
        "memory-similar": f"/api/v1/memories/{world.memory.pk}/similar/",
        "circle-memories": f"/api/v1/circles/{world.circle.pk}/memories/",
    }.get(path, path)
    url = f"{path}?{_query_string(data.draw(_query_pairs(fields), label='query'))}"
    send(
        lambda: _api_call(world, caller, "get", url, b"", "application/json"),
        refused=_api_refused,
        json_errors=True,
    )


# --- malformed ids and tokens in API paths, on every method ------------------------------------------

HOSTILE_PATH_SEGMENTS = [
    "-1",
    "0",
    "9223372036854775808",
    "%00",
    "%ED%A0%80",
    "%FF",
    "x" * 5_000,
    "..",
    "%2F",
]


@pytest.mark.parametrize("caller", ["owner", "agent"])
@given(
    template=st.sampled_from(
        [
            "/api/v1/memories/{}/",
            "/api/v1/people/{}/consent/",
            "/api/v1/circles/{}/members/{}/",
            "/api/v1/links/{}/accept/",
            "/api/v1/invites/{}/accept/",
            "/api/v1/tokens/{}/revoke/",
            "/api/v1/agents/{}/chat/",
            "/api/v1/memories/{}/shares/{}/",
        ]
    ),
    segment=st.sampled_from(HOSTILE_PATH_SEGMENTS),
    method=st.sampled_from(["get", "post", "put", "patch", "delete"]),
)
@FUZZ
def test_api_hostile_path_segments_are_json_4xx(world, caller, template, segment, method) -> None:
    url = template.replace("{}", segment)
    send(
        lambda: _api_call(world, caller, method, url, b"{}", "application/json"),
        refused=_api_refused,
        json_errors=True,
    )


# --- the web forms -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebSurface:
    name: str
    method: str
    path: Callable[[World], str]
    fields: Callable[[World], dict[str, list[Any]]]


def _memory_form_fields(w: World) -> dict[str, list[Any]]:
    return {
        "title": ["Lunch"],
        "body": ["We had lunch by the river."],
        "occurred_at": ["2024-05-01T12:00", "2024-05-01"],
        "kind": ["event", "knowledge", ""],
        "sensitivity": ["personal", ""],
        "source_person": [str(w.carol.pk), ""],
        "people-TOTAL_FORMS": ["0", "1", "2"],
        "people-INITIAL_FORMS": ["0"],
        "people-MIN_NUM_FORMS": ["0"],
        "people-MAX_NUM_FORMS": ["20"],
        "people-0-person": [str(w.carol.pk), str(w.bob.pk), ""],
        "people-0-new_name": ["Eve", ""],
        "people-0-role": ["subject", "present"],
        "people-1-person": [str(w.bob.pk)],
        "people-1-role": ["subject"],
    }


def _person_form_fields(w: World) -> dict[str, list[Any]]:
    return {"display_name": ["Dana"], "aliases": ["Dee, D"], "kind": ["human", "pet"], "notes": ["Friend."]}


WEB_SURFACES = [
    WebSurface("memory add", "post", lambda w: "/memories/new/", _memory_form_fields),
    WebSurface("memory edit", "post", lambda w: f"/memories/{w.memory.pk}/edit/", _memory_form_fields),
    WebSurface("person add", "post", lambda w: "/people/new/", _person_form_fields),
    WebSurface("person edit", "post", lambda w: f"/people/{w.bob.pk}/edit/", _person_form_fields),
    WebSurface(
        "person consent",
        "post",
        lambda w: f"/people/{w.bob.pk}/consent/",
        lambda w: {"status": ["granted", "revoked"], "reason": ["Asked."]},
    ),
    WebSurface(
        "my consent",
        "post",
        lambda w: f"/me/consents/people/{w.alice_in_mallorys_journal.pk}/",
        lambda w: {"audience": ["agents"], "status": ["granted", "revoked"], "reason": ["Mine."]},
    ),
    WebSurface(
        "circle add",
        "post",
        lambda w: "/circles/new/",
        lambda w: {"name": ["Book club"], "description": ["Thursdays."]},
    ),
    WebSurface(
        "circle edit",
        "post",
        lambda w: f"/circles/{w.circle.pk}/edit/",
        lambda w: {"name": ["Family"], "description": ["All of us."]},
    ),
    WebSurface(
        "circle memory",
        "post",
        lambda w: f"/circles/{w.circle.pk}/memories/new/",
        lambda w: {
            "body": ["Picnic on Sunday."],
            "title": ["Picnic"],
            "sensitivity": ["public", "personal"],
            "people": [str(w.carol.pk), str(w.bob.pk)],
        },
    ),
    WebSurface(
        "circle invite",
        "post",
        lambda w: f"/circles/{w.circle.pk}/invites/new/",
        lambda w: {"days": ["7", "14", "30"]},
    ),
    WebSurface(
        "agent add",
        "post",
        lambda w: "/agents/new/",
        lambda w: {"name": ["Coach"], "instructions": ["Be brief."], "role": ["custom", "brainstorm"]},
    ),
    WebSurface(
        "web chat",
        "post",
        lambda w: f"/agents/{w.caregiver.pk}/chat/send/",
        lambda w: {"message": ["What did Carol plant?"], "conversation": [""]},
    ),
    WebSurface("search", "get", lambda w: "/search/", lambda w: {"q": ["park"]}),
    WebSurface(
        "timeline filters",
        "get",
        lambda w: "/",
        lambda w: {
            "page": ["1", "2"],
            "person": [str(w.carol.pk)],
            "kind": ["event"],
            "date_from": ["2024-01-01"],
            "date_to": ["2024-12-31"],
            "expired": ["show"],
        },
    ),
    WebSurface("circle page", "get", lambda w: f"/circles/{w.circle.pk}/", lambda w: {"page": ["1"]}),
    WebSurface(
        "circle search", "get", lambda w: f"/circles/{w.circle.pk}/search/", lambda w: {"q": ["park"]}
    ),
    WebSurface(
        "replaces picker", "get", lambda w: f"/memories/{w.memory.pk}/replaces/", lambda w: {"q": ["park"]}
    ),
    # Issue #40: the Universe, calendar, chat and the other pages' query strings and htmx posts.
    WebSurface("universe", "get", lambda w: "/universe/", lambda w: _universe_fields(w)),
    WebSurface("universe graph", "get", lambda w: "/universe/graph.json", lambda w: _universe_fields(w)),
    WebSurface(
        "calendar",
        "get",
        lambda w: "/calendar/",
        lambda w: {"month": ["2024-05", "0002-01", "9000-12"], "in": ["timeline", ""]},
    ),
    WebSurface(
        "on this day", "get", lambda w: "/on-this-day/", lambda w: {"date": ["2024-05-01", "9000-12-31"]}
    ),
    WebSurface("mentions", "get", lambda w: "/people/mentions/", lambda w: {"q": ["Bo", "Carol"]}),
    WebSurface(
        "participant row",
        "get",
        lambda w: "/memories/people-row/",
        lambda w: {"people-TOTAL_FORMS": ["1", "2"]},
    ),
    WebSurface(
        "circle chat",
        "post",
        lambda w: f"/circles/{w.circle.pk}/chat/send/",
        lambda w: {"message": ["What did we plant?"]},
    ),
    WebSurface(
        "circle private chat",
        "post",
        lambda w: f"/circles/{w.circle.pk}/chat/private/send/",
        lambda w: {"message": ["What did we plant?"]},
    ),
]


def _universe_fields(w: World) -> dict[str, list[Any]]:
    return {
        "person": [str(w.carol.pk), ""],
        "since": ["2024-01-01", "0001-01-01", ""],
        "until": ["2024-12-31", "9000-12-31", ""],
        "limit": ["50", "1"],
    }


form_text = st.one_of(
    # Near Django's 2.5 MB upload limit: past PostgreSQL's 1 MB tsvector unless a form caps it.
    st.sampled_from([*HOSTILE_TEXT, "x" * 2_000_000]),
    st.sampled_from(EDGE_DATES),
    st.sampled_from([str(number) for number in HUGE_COUNTS]),
    st.text(max_size=40),
)


def _form_pairs(fields: dict[str, list[Any]]) -> st.SearchStrategy[list[tuple[str, str]]]:
    def value_for(name: str) -> st.SearchStrategy[str]:
        return st.one_of(st.sampled_from(fields[name]), form_text)

    names = st.sampled_from(sorted(fields))
    one_of_each = st.fixed_dictionaries({}, optional={name: value_for(name) for name in fields}).map(
        lambda values: list(values.items())
    )
    # Repeated keys, too: a form field sent twice with two different values.
    repeats = st.lists(names.flatmap(lambda name: st.tuples(st.just(name), value_for(name))), max_size=3)
    return st.tuples(one_of_each, repeats).map(lambda both: both[0] + both[1])


# How the pages show a refusal: field errors, a form's errors, an error message.
FORM_ERROR_MARKERS = (b'class="error"', b'class="form-errors"', b"has-error", b"message-error")


def _web_refused(response) -> bool:
    # Saved: a redirect, or the page (or htmx fragment) showing the result. Refused: a 4xx,
    # or the form shown again with its errors; then nothing may have been written.
    if response.status_code >= 400:
        return True
    return response.status_code == 200 and any(marker in response.content for marker in FORM_ERROR_MARKERS)


@pytest.mark.parametrize("surface", WEB_SURFACES, ids=lambda surface: surface.name)
@FUZZ
@given(data=st.data())
def test_web_form_refuses_hostile_input_cleanly(world, surface, data) -> None:
    htmx = data.draw(st.booleans(), label="htmx")
    pairs = data.draw(_form_pairs(surface.fields(world)), label="form")
    # Invalid UTF-8 (a lone surrogate as CESU bytes, a stray 0xFF) arrives as raw percent escapes.
    encoded = _query_string(pairs) + data.draw(st.sampled_from(["", "&body=%FF%FE", "&q=%ED%A0%80"]))
    headers = {"HX-Request": "true"} if htmx else {}
    url = surface.path(world)
    if surface.method == "get":

        def request():
            return world.session.get(f"{url}?{encoded}", headers=headers)

        # A page read never writes anything the owner could see change (the owner's reads are not logged).
        refused = lambda response: True  # noqa: E731
    else:

        def request():
            return world.session.post(
                url, encoded, content_type="application/x-www-form-urlencoded", headers=headers
            )

        refused = _web_refused
    send(request, refused=refused, json_errors=False)


BAD_FORM_TEXT = ["\x00", "x" * 2_000_000, "9999-12-31 23:59", "0001-01-01", "-1", "9223372036854775808"]


@pytest.mark.parametrize("surface", WEB_SURFACES, ids=lambda surface: surface.name)
def test_web_form_every_field_at_once_with_each_bad_text(world, surface) -> None:
    url = surface.path(world)
    for value in BAD_FORM_TEXT:
        encoded = _query_string([(name, value) for name in surface.fields(world)])
        if surface.method == "get":
            send(
                lambda encoded=encoded: world.session.get(f"{url}?{encoded}"),
                refused=lambda r: True,
                json_errors=False,
            )
        else:
            send(
                lambda encoded=encoded: world.session.post(
                    url, encoded, content_type="application/x-www-form-urlencoded"
                ),
                refused=_web_refused,
                json_errors=False,
            )


# --- the import upload ------------------------------------------------------------------------------


def _dayone_document(entries: list[dict]) -> dict:
    return {"metadata": {"version": "1.0"}, "entries": entries}


dayone_entry = st.fixed_dictionaries(
    {},
    optional={
        "uuid": field_values(["0123456789ABCDEF0123456789ABCDEF"]),
        "creationDate": field_values(["2020-01-01T10:00:00Z"]),
        "modifiedDate": field_values(["2020-01-02T10:00:00Z"]),
        "text": field_values(["A walk by the sea."]),
        "tags": field_values([["walks"], []]),
        "starred": field_values([True]),
    },
)
keepsake_document = st.fixed_dictionaries(
    {"format": st.just("keepsake-export")},
    optional={
        "schema_version": field_values([1]),
        "account": field_values([{"username": "alice"}]),
        "people": field_values([[{"id": "p1", "display_name": "Dana", "kind": "human"}], []]),
        "memories": field_values(
            [[{"id": "m1", "body": "Hello", "occurred_at": "2020-01-01T00:00:00Z", "kind": "event"}], []]
        ),
        "consent_events": field_values([[]]),
        "edges": field_values([[]]),
    },
)
upload_content = st.one_of(
    st.lists(dayone_entry, max_size=3).map(_dayone_document).map(lambda doc: json.dumps(doc).encode()),
    keepsake_document.map(lambda doc: json.dumps(doc).encode()),
    st.sampled_from(RAW_JSON_BODIES),
    st.binary(max_size=64),
)


@FUZZ
@given(
    content=upload_content,
    filename=st.sampled_from(
        ["Journal.json", "keepsake.json", "Journal.zip", "x\x00.json", "é" * 300 + ".json"]
    ),
)
def test_import_upload_refuses_hostile_files_cleanly(world, content, filename) -> None:
    def request():
        upload = SimpleUploadedFile(filename, content, "application/json")
        return world.session.post("/settings/import/", {"file": upload})

    send(request, refused=_web_refused, json_errors=False)


# --- MCP ------------------------------------------------------------------------------------------

MCP_TOOLS: dict[str, Callable[[World], dict[str, list[Any]]]] = {
    "search_memories": lambda w: {"query": ["park"], "limit": [5], "circle": ["", str(w.circle.pk)]},
    "get_person": lambda w: {"name": ["Carol", "Bob"]},
    "timeline_window": lambda w: {
        "start": ["2024-01-01"],
        "end": ["2024-12-31"],
        "limit": [5],
        "circle": ["", str(w.circle.pk)],
    },
    "privacy_audit": lambda w: {"memory_id": [str(w.memory.pk)]},
    "memory_propose": lambda w: {"text": ["Carol likes red tulips."], "from_memories": [[str(w.memory.pk)]]},
    "consent_request": lambda w: {"person_name": ["Bob", "Nobody"], "reason": ["For the chess club."]},
}


def _mcp_post(world: World, body: bytes, *, caller: str = "agent", content_type: str = "application/json"):
    return Client().post(
        "/mcp/",
        body,
        content_type=content_type,
        headers={
            "Authorization": f"Bearer {world.token(caller)}",
            "Accept": "application/json, text/event-stream",
        },
    )


def _mcp_checked(world: World, body: bytes, *, caller: str = "agent", content_type: str = "application/json"):
    response = send(
        lambda: _mcp_post(world, body, caller=caller, content_type=content_type),
        refused=_api_refused,
        json_errors=True,
    )
    if response.status_code == 200 and response.content:
        answer = json.loads(response.content)
        result = answer.get("result") if isinstance(answer, dict) else None
        if isinstance(result, dict) and result.get("isError"):
            text = " ".join(part.get("text", "") for part in result.get("content", []))
            # The SDK's answer to a crash is the bare prefix; an anticipated error says why.
            assert ":" in text.removeprefix("Error executing tool"), f"tool crashed: {text!r}"
    return response


@pytest.mark.parametrize("tool", sorted(MCP_TOOLS))
@FUZZ
@given(data=st.data())
def test_mcp_tool_refuses_hostile_arguments_cleanly(world, tool, data) -> None:
    fields = MCP_TOOLS[tool](world)
    arguments = data.draw(
        st.fixed_dictionaries({}, optional={name: field_values(valid) for name, valid in fields.items()}),
        label="arguments",
    )
    envelope = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    _mcp_checked(world, json.dumps(envelope).encode())


MCP_TEXT_ARGUMENTS = {
    "search_memories": ("query", "circle"),
    "get_person": ("name",),
    "timeline_window": ("start", "end", "circle"),
    "privacy_audit": ("memory_id",),
    "memory_propose": ("text", "from_memories"),
    "consent_request": ("person_name", "reason"),
}


@pytest.mark.parametrize("tool", sorted(MCP_TOOLS))
def test_mcp_every_text_argument_refuses_every_bad_text(world, tool) -> None:
    valid = {name: values[0] for name, values in MCP_TOOLS[tool](world).items()}
    for name in MCP_TEXT_ARGUMENTS[tool]:
        for value in BAD_TEXT:
            arguments = {**valid, name: [value] if name == "from_memories" else value}
            envelope = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
            response = _mcp_checked(world, json.dumps(envelope).encode())
            answer = json.loads(response.content)
            refused = "error" in answer or answer["result"].get("isError")
            assert refused, (name, repr(value)[:40], response.content[:200])


mcp_envelope = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": field_values(["2.0"]),
        "id": field_values([1, "a"]),
        "method": field_values(["tools/call", "tools/list", "initialize", "resources/list", "nope"]),
        "params": field_values([{"name": "search_memories", "arguments": {"query": "park"}}, {}]),
    },
).map(lambda envelope: json.dumps(envelope).encode())


@pytest.mark.parametrize("caller", ["agent", "owner"])
@FUZZ
@given(
    body=st.one_of(mcp_envelope, mcp_envelope, st.sampled_from(RAW_JSON_BODIES)),
    content_type=st.sampled_from(["application/json", "application/json", "text/plain", ""]),
)
def test_mcp_hostile_json_rpc_is_a_json_error(world, caller, body, content_type) -> None:
    _mcp_checked(world, body, caller=caller, content_type=content_type)


# --- the snapshot itself --------------------------------------------------------------------------


def test_snapshot_sees_a_changed_value_not_only_a_new_row(world) -> None:
    before = snapshot()
    Person.objects.filter(pk=world.bob.pk).update(notes="Changed behind the form's back.")
    assert changed_tables(before, snapshot()) == [Person._meta.db_table]
