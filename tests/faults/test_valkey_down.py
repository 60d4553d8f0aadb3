"""Valkey stopped, then frozen, while memories are saved on the web form (plain and htmx) and the API.

Every save succeeds (the memory is in PostgreSQL; only the request to embed it
could not be queued), none hangs, and once Valkey is back a worker with beat
embeds every one of them: the sweep finds what no message asks for.
"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.db.models import F
from django.test import Client
from django.urls import reverse

from accounts.models import TokenKind
from accounts.services import access_token_create
from memories.models import Memory
from tests.faults.conftest import wait_until
from tests.memories.test_views import quick_add_data

pytestmark = [pytest.mark.faults, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

HX = {"HTTP_HX_REQUEST": "true"}
# A request that has not answered by then hangs, as far as a person is concerned.
HANG = 60


def _in_time(request, *args, **kwargs):
    """Make the request in a thread; fail if it has not answered within HANG seconds."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["response"] = request(*args, **kwargs)
        finally:
            # This thread's own database connection (kept a minute, CONN_MAX_AGE) would
            # otherwise stay open past the test, on the test database.
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"the save hung for {HANG}s with Valkey unreachable"
    return outcome["response"]


def _save_everywhere(client: Client, token: str, label: str) -> list[str]:
    """Save one memory per surface; return their bodies."""
    bodies = [f"{label}: the plain form", f"{label}: the htmx form", f"{label}: the API"]
    response = _in_time(client.post, reverse("memory_create"), quick_add_data(body=bodies[0]))
    assert response.status_code == 302, response.content[:500]
    page = client.get(response["Location"]).content.decode()
    assert "Memory saved." in page  # the usual confirmation, not an error

    response = _in_time(client.post, reverse("memory_create"), quick_add_data(body=bodies[1]), **HX)
    assert response.status_code == 200
    assert bodies[1] in response.content.decode()  # the new card, prepended to the timeline

    response = _in_time(
        client.post,
        "/api/v1/memories/",
        data=json.dumps({"body": bodies[2]}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 201, response.content[:500]
    assert response.json()["body"] == bodies[2]
    return bodies


def test_saves_with_valkey_stopped_or_frozen_succeed_and_are_embedded_when_it_is_back(
    alice, alice_client, broker, make_worker
):
    _, token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="scripts")

    broker.stop()  # refused connections
    saved = _save_everywhere(alice_client, token, "Valkey stopped")
    broker.start()
    broker.freeze()  # connections accepted, never answered
    saved += _save_everywhere(alice_client, token, "Valkey frozen")
    broker.thaw()

    memories = Memory.objects.filter(owner=alice)
    assert sorted(memories.values_list("body", flat=True)) == sorted(saved)
    assert not memories.filter(embedded_at__isnull=False).exists()

    worker = make_worker(MEMORY_SWEEP_INTERVAL="2", MEMORY_SWEEP_GRACE="0")
    worker.start()
    wait_until(
        lambda: (
            not memories.filter(embedded_at__isnull=True).exists()
            and not memories.exclude(edges_computed_at__gte=F("embedded_at")).exists()
        ),
        what="the sweep to embed what was saved while Valkey was away",
        state=lambda: list(memories.values_list("body", "embedded_at", "edges_computed_at")),
    )
    worker.stop()
