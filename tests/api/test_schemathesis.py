"""The API against its own OpenAPI schema, with schemathesis.

Requests are generated from /api/schema/ and sent in-process to the project's
WSGI application, authenticated with an owner token and, separately, an agent
token. Every response must be free of server errors and match the schema
(status code, content type, headers, body). Generated ids are often swapped for
ids that exist, so the checks see real objects and not only 404s.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import hypothesis
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.models import AccessToken
from agents.models import Agent
from memories.models import Memory
from people.models import Person

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Bounded for the default run; HYPOTHESIS_PROFILE=thorough scales it up.
EXAMPLES_PER_OPERATION = max(6, hypothesis.settings().max_examples // 20)


@pytest.fixture
def wsgi_app() -> Iterator[object]:
    # A real WSGI request closes "old" database connections when it ends, which
    # would close the test's transaction; Django's own test client disconnects
    # the same handler for the same reason.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _existing_ids(world) -> dict[str, list[str]]:
    return {
        "person_id": [
            str(pk) for pk in Person.objects.filter(owner=world.alice).values_list("pk", flat=True)
        ],
        "memory_id": [
            str(pk) for pk in Memory.objects.filter(owner=world.alice).values_list("pk", flat=True)
        ],
        "agent_id": [str(pk) for pk in Agent.objects.filter(owner=world.alice).values_list("pk", flat=True)],
        "token_id": [
            str(pk) for pk in AccessToken.objects.filter(owner=world.alice).values_list("pk", flat=True)
        ],
    }


def _maybe_existing(value: object, candidates: list[str]) -> object:
    """Deterministically swap a generated id for an existing one (or keep it, sometimes)."""
    if not candidates:
        return value
    slot = zlib.crc32(str(value).encode()) % (len(candidates) + 1)
    return value if slot == len(candidates) else candidates[slot]


def _point_at_real_objects(case, ids: dict[str, list[str]]) -> None:
    for name, value in list((case.path_parameters or {}).items()):
        case.path_parameters[name] = _maybe_existing(value, ids.get(name, []))
    if isinstance(case.query, dict) and "person" in case.query:
        case.query["person"] = _maybe_existing(case.query["person"], ids["person_id"])
    if isinstance(case.body, dict):
        if case.body.get("source_person"):
            case.body["source_person"] = _maybe_existing(case.body["source_person"], ids["person_id"])
        for participant in case.body.get("participants") or []:
            if isinstance(participant, dict) and "person" in participant:
                participant["person"] = _maybe_existing(participant["person"], ids["person_id"])


def _run_every_operation(wsgi_app, world, token: str) -> tuple[list[str], dict[str, set[int]]]:
    schema = schemathesis.openapi.from_wsgi("/api/schema/", wsgi_app)
    failures: list[str] = []
    statuses: dict[str, set[int]] = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def exercise(case) -> None:
            _point_at_real_objects(case, _existing_ids(world))
            response = case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
            statuses.setdefault(case.operation.label, set()).add(response.status_code)

        try:
            exercise()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.label}: {exc}")
    assert operations >= 20, "the schema lost operations"
    return failures, statuses


def test_api_conforms_to_its_schema_for_an_owner_token(wsgi_app, world) -> None:
    failures, statuses = _run_every_operation(wsgi_app, world, world.owner_token)

    assert failures == [], "\n\n".join(failures)
    # The run reached real objects, not only 404s: every owner read succeeded at least once.
    reads = {
        label: codes
        for label, codes in statuses.items()
        if label.startswith("GET ") and "tokens" not in label
    }
    never_ok = [label for label, codes in reads.items() if not any(200 <= code < 300 for code in codes)]
    assert never_ok == []


def test_api_conforms_to_its_schema_for_an_agent_token(wsgi_app, world) -> None:
    failures, statuses = _run_every_operation(wsgi_app, world, world.agent_token)

    assert failures == [], "\n\n".join(failures)
    assert statuses["GET /api/v1/memories/"] & {200}
