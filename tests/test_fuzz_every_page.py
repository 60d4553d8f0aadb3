"""Every page, form and htmx endpoint, with hostile query strings and form fields: never a 5xx.

Issue #40 item 2. tests/test_fuzz_write_surfaces.py draws hostile values for the main
write surfaces and checks that a refusal changes nothing; this file makes sure no page
is left out. It walks the whole URLconf (a page added later is fuzzed without anyone
listing it), fills each route's ids with real objects of Alice's (and Mallory's, where
the route is for someone else), and sends:

- GET with every query parameter any page reads set to each hostile value;
- POST with every field of every web form in the project set to each hostile value;

each plain and as htmx (`HX-Request`), as Alice signed in and as a stranger. The
answer must be below 500, and no request may need config.input_edge's last net (an
unchecked value reaching PostgreSQL or date arithmetic): that net keeps production
from answering 500, and each use is a check missing where the value comes in.

The REST API and MCP are fuzzed by tests/test_fuzz_write_surfaces.py and
tests/api/test_schemathesis.py; they are left out here.
"""

from __future__ import annotations

import importlib
import logging
import re
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from django import forms
from django.conf import settings as django_settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from agents.services import conversation_create
from tests.agents.conftest import llm_stub  # noqa: F401  (the world's chat answers from the stub LLM)
from tests.test_fuzz_write_surfaces import World, world  # noqa: F401  (the fixture)

pytestmark = pytest.mark.django_db

# Served by other fuzzers (above), or not pages at all.
SKIPPED_PREFIXES = ("api/", "^mcp", "mcp/", "admin/", "static/")

# Query parameters the pages read directly (request.GET.get(...)), besides form fields.
QUERY_NAMES = {
    "q",
    "page",
    "person",
    "kind",
    "date_from",
    "date_to",
    "expired",
    "since",
    "until",
    "limit",
    "month",
    "date",
    "in",
    "next",
    "conversation",
    "people-TOTAL_FORMS",
    "people-INITIAL_FORMS",
    "people-0-person",
    "people-0-new_name",
    "people-0-role",
    "return_query",
    "mention_asked",
    "mention_add",
}

# One of each kind of trouble, each sent in every field at once.
HOSTILE_VALUES = [
    "\x00",
    "Tea\x00time \x07\x1b[31m\x7f\x85",
    "x" * 5_000,
    "é" * 300,
    "9999-12-31",
    "9999-12",
    "10000-01-01",
    "0001-01-01",
    "0000-00-00",
    "-1",
    "9223372036854775808",
    "1e999",
    " ",
]
# Sent in one parameter at a time.
SINGLE_VALUES = ["9999-12-31", "9223372036854775808"]
# Raw escapes a browser could send: invalid UTF-8, a lone surrogate as CESU bytes.
RAW_ESCAPES = ["%FF%FE", "%ED%A0%80", "%00"]


def _routes() -> Iterator[tuple[str, URLPattern]]:
    def walk(patterns, prefix: str):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern), pattern

    yield from walk(get_resolver().url_patterns, "")


ROUTES = sorted(
    {route: pattern for route, pattern in _routes() if not route.startswith(SKIPPED_PREFIXES)}.items()
)


def _form_field_names() -> set[str]:
    """Every field name of every form class in the project's apps."""
    project_apps = {app.split(".")[0] for app in django_settings.INSTALLED_APPS if "." not in app}
    for app in project_apps:
        for module in ("forms", "views"):
            try:
                importlib.import_module(f"{app}.{module}")
            except ModuleNotFoundError:
                pass
    names: set[str] = set()
    pending: list[type] = [forms.BaseForm]
    while pending:
        form_class = pending.pop()
        pending.extend(form_class.__subclasses__())
        if form_class.__module__.split(".")[0] in project_apps:
            names |= set(getattr(form_class, "base_fields", {}))
    return names


def _path(route: str, pattern: URLPattern, w: World, conversation_id: uuid.UUID) -> str:
    by_name = {
        "person_id": w.bob.pk,
        "memory_id": w.memory.pk,
        "circle_id": w.circle.pk,
        "agent_id": w.caregiver.pk,
        "conversation_id": conversation_id,
        "token_id": w.spare_token_id,
        "user_id": w.mallory.pk,
        "owner_id": w.mallory.pk,
    }
    values = {}
    for name, converter in pattern.pattern.converters.items():
        if name == "token":
            values[name] = w.bob_link_token if route.startswith("links/") else w.mallory_invite_token
        elif name in by_name:
            values[name] = by_name[name]
        elif type(converter).__name__ == "IntConverter":
            values[name] = 1
        else:
            values[name] = uuid.uuid4()  # no such object: the page's 404 is fuzzed too
    path = route.replace("^", "").replace("$", "")
    for name, value in values.items():
        path = re.sub(rf"<(?:\w+:)?{name}>", str(value), path)
    return "/" + path


class _NetUsed(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())


@pytest.fixture
def net_watch() -> Iterator[_NetUsed]:
    handler = _NetUsed()
    logger = logging.getLogger("config.input_edge")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def _encoded(names: set[str], value: str) -> str:
    return "&".join(f"{quote(name)}={quote(value)}" for name in sorted(names))


def test_the_walk_finds_the_pages_and_the_forms() -> None:
    routes = {route for route, _ in ROUTES}
    for page in ("universe/graph.json", "calendar/", "search/", "circles/<uuid:circle_id>/chat/send/", ""):
        assert page in routes
    fields = _form_field_names()
    assert {"body", "display_name", "message", "since", "until", "date_from", "name"} <= fields


@pytest.mark.parametrize(("route", "pattern"), ROUTES, ids=[route or "/" for route, _ in ROUTES])
def test_every_page_and_form_answers_hostile_input_below_500(world, net_watch, route, pattern) -> None:  # noqa: F811
    conversation = conversation_create(owner=world.alice, agent=world.caregiver)
    path = _path(route, pattern, world, conversation.pk)
    stranger = Client()
    stranger.force_login(world.mallory)
    query_names = QUERY_NAMES | _form_field_names()
    failures: list[str] = []

    def check(response, what: str) -> None:
        if response.status_code >= 500:
            failures.append(f"{what}: {response.status_code} {response.content[:200]!r}")

    # Alice with every value; a stranger and an anonymous caller with the first (they are
    # turned away before any input is read, which is what is checked).
    # htmx fragments with the three that most often break a partial: a NUL, the last day, a long text.
    runs = [
        ("alice", world.session, False, HOSTILE_VALUES),
        ("alice", world.session, True, [HOSTILE_VALUES[0], HOSTILE_VALUES[2], HOSTILE_VALUES[4]]),
        ("mallory", stranger, False, HOSTILE_VALUES[:1]),
        ("anonymous", Client(), False, HOSTILE_VALUES[:1]),
    ]
    for who, client, htmx, values in runs:
        headers = {"HX-Request": "true"} if htmx else {}
        for value in values:
            encoded = _encoded(query_names, value)
            check(client.get(f"{path}?{encoded}", headers=headers), f"{who} GET {value[:20]!r} htmx={htmx}")
        if who == "alice" and not htmx:
            for raw in RAW_ESCAPES:
                encoded = "&".join(f"{quote(name)}={raw}" for name in sorted(query_names))
                check(client.get(f"{path}?{encoded}", headers=headers), f"{who} GET {raw} htmx={htmx}")
    # Each page parameter alone too, at the edge of the calendar or of bigint: with every
    # field hostile at once, a form refuses the first bad field before another's
    # arithmetic runs (`until=9999-12-31` alone overflowed the Universe page).
    if world.session.get(path).status_code == 200:
        for name in sorted(QUERY_NAMES):
            for value in SINGLE_VALUES:
                check(world.session.get(f"{path}?{_encoded({name}, value)}"), f"alice GET {name}={value}")
    # POSTs last: some of them delete what the route points at (later ones then get a 404).
    for who, client, htmx, values in runs:
        headers = {"HX-Request": "true"} if htmx else {}
        for value in values:
            response = client.post(
                path,
                _encoded(query_names, value),
                content_type="application/x-www-form-urlencoded",
                headers=headers,
            )
            check(response, f"{who} POST {value[:20]!r} htmx={htmx}")
    assert failures == []
    assert net_watch.records == [], "input reached the database or date arithmetic unchecked"
