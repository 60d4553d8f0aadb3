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
from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from circles.models import Circle, CircleMembership
from circles.services import circle_create, invite_accept, invite_create, join_request_approve, memory_share
from memories.models import Memory
from people.models import ConsentStatus, Person
from people.services import person_set_consent
from tests.attachments.photos import upload
from tests.factories import UserFactory

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


@pytest.fixture
def circle_world(world):
    """Alice's circle "Book club": a member, two shared memories, an invite and a request waiting."""
    circle = circle_create(owner=world.alice, name="Book club")
    join_request_approve(
        request=invite_accept(token=invite_create(circle=circle, by=world.alice).token, user=UserFactory()),
        by=world.alice,
    )
    invite_accept(token=invite_create(circle=circle, by=world.alice).token, user=UserFactory())
    person_set_consent(
        person=world.carol, status=ConsentStatus.GRANTED, actor=world.alice, audience=circle.audience
    )
    for memory in (world.memory_with_carol, world.memory_alone):
        memory_share(memory=memory, circle=circle, by=world.alice)
    return circle


@pytest.fixture(autouse=True)
def _photo_store(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def _alice_photo_ids(world) -> list[str]:
    """Alice's photos; one is added whenever the DELETE examples (a photo's, a memory's) took the last."""
    photos = Attachment.objects.filter(owner=world.alice)
    memory = Memory.objects.filter(owner=world.alice).first()
    if not photos.exists() and memory is not None:
        attachments_add(memory=memory, images=[image_prepare(upload())])
    return [str(pk) for pk in photos.values_list("pk", flat=True)]


def _circle_contents(world) -> dict[str, dict[str, list[str]]]:
    """For each of Alice's circles, the ids that live in it: members, invites, requests, shared memories."""
    return {
        str(circle.pk): {
            "user_id": [str(pk) for pk in circle.memberships.values_list("user_id", flat=True)],
            "invite_id": [str(pk) for pk in circle.invites.values_list("pk", flat=True)],
            "request_id": [str(pk) for pk in circle.join_requests.values_list("pk", flat=True)],
            "memory_id": [str(pk) for pk in circle.shares.values_list("memory_id", flat=True)],
        }
        for circle in Circle.objects.filter(memberships__user=world.alice)
    }


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
        "photo_id": _alice_photo_ids(world),
        "circle_id": [
            str(pk)
            for pk in CircleMembership.objects.filter(user=world.alice)
            .order_by("joined_at")
            .values_list("circle_id", flat=True)
        ],
    }


def _maybe_existing(value: object, candidates: list[str]) -> object:
    """Deterministically swap a generated id for an existing one (or keep it, sometimes)."""
    if not candidates:
        return value
    slot = zlib.crc32(str(value).encode()) % (len(candidates) + 1)
    return value if slot == len(candidates) else candidates[slot]


def _point_at_real_objects(case, ids: dict[str, list[str]], world, kept_circle: Circle) -> None:
    params = case.path_parameters or {}
    inside: dict[str, list[str]] = {}
    if "circle_id" in params:
        # Ids inside a circle (its members, invites, requests, memories) are taken from the same circle.
        circles = ids["circle_id"]
        if case.method.upper() == "DELETE" and case.path.endswith("/circles/{circle_id}/"):
            # Deleting the fixture's circle would leave the operations after it only 404s.
            circles = [pk for pk in circles if pk != str(kept_circle.pk)]
        params["circle_id"] = _maybe_existing(params["circle_id"], circles)
        inside = _circle_contents(world).get(str(params["circle_id"]), {})
    for name, value in list(params.items()):
        if name != "circle_id":
            params[name] = _maybe_existing(value, inside.get(name) or ids.get(name, []))
    if isinstance(case.query, dict) and "person" in case.query:
        case.query["person"] = _maybe_existing(case.query["person"], ids["person_id"])
    if isinstance(case.body, dict):
        if case.body.get("circle"):
            case.body["circle"] = _maybe_existing(case.body["circle"], ids["circle_id"])
        if case.body.get("source_person"):
            case.body["source_person"] = _maybe_existing(case.body["source_person"], ids["person_id"])
        for participant in case.body.get("participants") or []:
            if isinstance(participant, dict) and "person" in participant:
                participant["person"] = _maybe_existing(participant["person"], ids["person_id"])


def _run_every_operation(
    wsgi_app, world, circle: Circle, token: str
) -> tuple[list[str], dict[str, set[int]]]:
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
            _point_at_real_objects(case, _existing_ids(world), world, circle)
            response = case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
            statuses.setdefault(case.operation.label, set()).add(response.status_code)

        try:
            exercise()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.label}: {exc}")
    assert operations >= 20, "the schema lost operations"
    return failures, statuses


def test_api_conforms_to_its_schema_for_an_owner_token(wsgi_app, world, circle_world) -> None:
    failures, statuses = _run_every_operation(wsgi_app, world, circle_world, world.owner_token)

    assert failures == [], "\n\n".join(failures)
    # The run reached real objects, not only 404s: every owner read succeeded at least once.
    reads = {
        label: codes
        for label, codes in statuses.items()
        if label.startswith("GET ") and "tokens" not in label
    }
    never_ok = [label for label, codes in reads.items() if not any(200 <= code < 300 for code in codes)]
    assert never_ok == [], {label: reads[label] for label in never_ok}


def test_api_conforms_to_its_schema_for_an_agent_token(wsgi_app, world, circle_world) -> None:
    failures, statuses = _run_every_operation(wsgi_app, world, circle_world, world.agent_token)

    assert failures == [], "\n\n".join(failures)
    assert statuses["GET /api/v1/memories/"] & {200}
