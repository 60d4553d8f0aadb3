"""The database connection cut under a request (pg_terminate_backend on this test's own session):
a clear 503 in the shape each caller reads, never a 500, and the next request works.

tests/faults/test_postgres_restart.py does the same with a real restart behind gunicorn; this
one is quick, in process, and covers each kind of caller.
"""

from __future__ import annotations

import json

import psycopg
import pytest
from django.db import OperationalError, connection
from django.test import RequestFactory

from accounts.models import TokenKind
from accounts.services import access_token_create
from config.unavailable import server_error
from memories.models import Memory

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def _cut_this_connection() -> None:
    """End this test's database session from another one, as a restart or a failover would."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    params = connection.settings_dict
    with psycopg.connect(
        host=params["HOST"], port=params["PORT"], user=params["USER"] or "postgres", dbname=params["NAME"]
    ) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.fixture
def cut(alice_client):
    yield _cut_this_connection
    # The test client keeps the connection across requests (a server closes it at the
    # request's end, see CONN_HEALTH_CHECKS); drop the dead one as the next request would.
    connection.close()


def test_web_page_answers_a_clear_503_page(alice_client, cut):
    cut()
    response = alice_client.get("/")
    assert response.status_code == 503
    assert response["Retry-After"]
    html = response.content.decode()
    assert "could not reach its database" in html and "Nothing was half-saved" in html
    connection.close()
    assert alice_client.get("/").status_code == 200


def test_htmx_save_answers_the_message_alone(alice_client, alice, cut):
    cut()
    response = alice_client.post("/memories/new/", {"body": "Lost?"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/plain")
    assert response.content.decode().startswith("Keepsake could not reach its database")
    connection.close()
    assert not Memory.objects.filter(owner=alice).exists()


@pytest.mark.parametrize("path", ["/api/v1/memories/", "/mcp/"])
def test_api_and_mcp_answer_json(alice, client, cut, path):
    if path.startswith("/api/"):
        _, token = access_token_create(owner=alice, kind=TokenKind.OWNER)
    else:
        _, token = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=alice.agents.first())
    cut()
    response = client.post(
        path,
        json.dumps({"body": "Lost?"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    body = response.json()
    message = body["detail"] if path.startswith("/api/") else body["error"]["message"]
    assert "could not reach its database" in message


def test_a_failure_outside_any_view_answers_503_too():
    # handler500 runs inside Django's `except` block, e.g. when the session cannot be saved.
    request = RequestFactory().get("/")
    try:
        raise OperationalError("the database system is shutting down")
    except OperationalError:
        response = server_error(request)
    assert response.status_code == 503
    try:
        raise ValueError("a bug")
    except ValueError:
        response = server_error(request)
    assert response.status_code == 500
