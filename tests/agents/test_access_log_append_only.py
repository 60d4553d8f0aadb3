"""The access log ("who has seen this memory") cannot be edited, through any surface or query.

Hardening issue, "Audit you can trust": no route offers to change or delete an entry
(every PUT, PATCH and DELETE of every route, web, API with each token kind and MCP,
leaves the log as it was), the admin does not show it, and the database itself refuses
UPDATE and DELETE (agents migration 0005) except what erasure needs: an agent's or a
viewer's account deleted clears that reference, and an entry goes with its memory
(deleting the memory, or the whole account).

The DELETE rule is a deferred trigger checked at commit; tests run inside a transaction
that is never committed, so they ask PostgreSQL to check now (SET CONSTRAINTS ALL
IMMEDIATE), which is exactly what a commit would do first.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

import pytest
from django.contrib import admin
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import URLResolver, get_resolver

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import AccessLog, AccessSurface, Agent
from agents.services import access_log_record, agent_create, agent_delete
from circles.services import circle_access_log_record
from memories.services import memory_create, memory_delete
from portability.services import account_delete

PASSWORD = "correct horse battery"


@dataclass
class Logged:
    alice: object
    mallory: object
    seen: object
    unseen: object
    caregiver: Agent
    helper: Agent
    owner_token: str
    agent_token: str


@pytest.fixture
def logged(alice, mallory) -> Logged:
    seen = memory_create(owner=alice, body="The garden in May.", kind="knowledge")
    unseen = memory_create(owner=alice, body="A quiet evening.", kind="knowledge")
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")
    helper = agent_create(owner=alice, name="Helper", instructions="Help me remember.")
    access_log_record(owner=alice, memories=[seen], surface=AccessSurface.API, agent=caregiver)
    access_log_record(owner=alice, memories=[seen], surface=AccessSurface.MCP, agent=helper)
    circle_access_log_record(memories=[seen], viewer=mallory)
    return Logged(
        alice=alice,
        mallory=mallory,
        seen=seen,
        unseen=unseen,
        caregiver=caregiver,
        helper=helper,
        owner_token=access_token_create(owner=alice, kind=TokenKind.OWNER)[1],
        agent_token=access_token_create(owner=alice, kind=TokenKind.AGENT, agent=caregiver)[1],
    )


def _log_rows() -> dict[int, tuple]:
    return {
        row[0]: row
        for row in AccessLog.objects.values_list(
            "id", "owner_id", "memory_id", "surface", "agent_id", "agent_name", "viewer_id", "created_at"
        )
    }


def _check_now() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


# --- no surface offers it --------------------------------------------------------------------


def _routes() -> list[str]:
    def walk(patterns, prefix: str = ""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            else:
                yield prefix + str(pattern.pattern)

    return [route for route in walk(get_resolver().url_patterns) if not route.startswith("admin/")]


def _url(route: str, logged: Logged) -> str:
    values = {
        "memory_id": logged.seen.pk,
        "agent_id": logged.helper.pk,
        "user_id": logged.mallory.pk,
        "owner_id": logged.mallory.pk,
    }
    if route == "^mcp/?$":
        return "/mcp/"
    if route == "api/^v1/":
        return "/api/v1/access-log/"

    def fill(match: re.Match) -> str:
        converter, name = match.group(1), match.group(2)
        if name in values:
            return str(values[name])
        return "1" if converter == "int:" else str(uuid.uuid4())

    return "/" + re.sub(r"<(\w+:)?(\w+)>", fill, route)


def test_no_route_is_about_the_access_log() -> None:
    about_logs = [route for route in _routes() if re.search(r"access|log(?!in|out)", route)]
    assert about_logs == []


def test_the_admin_does_not_show_the_access_log() -> None:
    assert AccessLog not in admin.site._registry


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/access-log/",
        "/api/v1/access-logs/1/",
        "/api/v1/memories/{memory}/access-log/",
        "/api/v1/memories/{memory}/log/",
    ],
)
@pytest.mark.parametrize("caller", ["owner", "agent"])
def test_guessed_log_endpoints_answer_json_404_to_every_method(logged, url, caller) -> None:
    url = url.format(memory=logged.seen.pk)
    token = logged.owner_token if caller == "owner" else logged.agent_token
    before = _log_rows()
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        response = Client().generic(
            method, url, "{}", content_type="application/json", headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code in (404, 405), (method, response.status_code)
        assert response["Content-Type"].startswith("application/json")
    assert _log_rows() == before


class _Undo(Exception):
    pass


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_no_route_changes_or_deletes_a_log_entry(logged, method) -> None:
    """Every route, with each caller: the entries of every memory still there are exactly as they were.

    Each request runs in a savepoint rolled back afterwards, so each starts from the same
    log (a DELETE of the memory itself may take its entries: that is erasure, checked below).
    """
    session = Client()
    session.force_login(logged.alice)
    callers = {
        "session": (session, {}),
        "owner": (Client(), {"Authorization": f"Bearer {logged.owner_token}"}),
        "agent": (Client(), {"Authorization": f"Bearer {logged.agent_token}"}),
    }
    before = _log_rows()
    checked = 0
    for route in _routes():
        url = _url(route, logged)
        api = url.startswith(("/api/", "/mcp"))
        for name, (client, headers) in callers.items():
            if name != "session" and not api:
                continue
            try:
                with transaction.atomic():
                    response = client.generic(
                        method,
                        url,
                        json.dumps({"surface": "chat"}),
                        content_type="application/json",
                        headers=headers,
                    )
                    assert response.status_code < 500, (method, url, name)
                    after = _log_rows()
                    still_there = {
                        row_id: row
                        for row_id, row in before.items()
                        if AccessLog.memory.field.related_model.objects.filter(pk=row[2]).exists()
                    }
                    assert {row_id: after.get(row_id) for row_id in still_there} == still_there, (
                        method,
                        url,
                        name,
                    )
                    checked += 1
                    raise _Undo
            except _Undo:
                pass
    assert checked > 100


# --- the database refuses ------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["surface", "agent_name", "agent", "viewer", "created_at"])
def test_an_entry_cannot_be_updated(logged, field) -> None:
    row = AccessLog.objects.get(surface=AccessSurface.CIRCLE if field == "viewer" else AccessSurface.MCP)
    change = {
        "surface": AccessSurface.CHAT,
        "agent_name": "Someone else",
        "agent": logged.caregiver,
        "viewer": logged.alice,
        "created_at": row.created_at.replace(year=2000),
    }[field]
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AccessLog.objects.filter(pk=row.pk).update(**{field: change})


def test_an_entry_cannot_be_moved_to_another_memory(logged) -> None:
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AccessLog.objects.filter(memory=logged.seen).update(memory=logged.unseen)


def test_an_entry_cannot_be_deleted_while_its_memory_stays(logged) -> None:
    with pytest.raises(DatabaseError, match="goes only with its memory"), transaction.atomic():
        AccessLog.objects.filter(memory=logged.seen, agent=logged.caregiver).delete()
        _check_now()


def test_deleting_an_agent_keeps_its_entries_under_its_name(logged) -> None:
    agent_delete(agent=logged.helper)
    _check_now()
    row = AccessLog.objects.get(surface=AccessSurface.MCP)
    assert (row.agent_id, row.agent_name, row.memory_id) == (None, "Helper", logged.seen.pk)


def test_deleting_a_viewers_account_keeps_the_entry_without_them(logged) -> None:
    account_delete(user=logged.mallory, password=PASSWORD)
    _check_now()
    row = AccessLog.objects.get(surface=AccessSurface.CIRCLE)
    assert (row.viewer_id, row.memory_id) == (None, logged.seen.pk)


def test_deleting_the_memory_takes_its_entries(logged) -> None:
    memory_delete(memory=logged.seen)
    _check_now()
    assert not AccessLog.objects.filter(owner=logged.alice).exists()


def test_deleting_the_owners_account_erases_the_log(logged) -> None:
    account_delete(user=logged.alice, password=PASSWORD)
    _check_now()
    assert not AccessLog.objects.exists()
