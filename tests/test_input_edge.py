"""Input cleaned and bounded at the edge (config/input_edge.py, config/form_inputs.py; issue #40 item 2).

The findings that answered 500 (a NUL in a circle chat message, `until=9999-12-31` on the
Universe page and its JSON), and what the one place at the edge does for every page:
control characters out of query strings and forms, the API's text fields refusing them,
and the last net for input no view checked.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.db import DataError
from django.http import HttpResponse
from django.test import Client, RequestFactory

from accounts.models import TokenKind
from accounts.services import access_token_create
from circles.models import CircleMessage
from circles.services import circle_create
from config.input_edge import InputEdgeMiddleware
from people.models import Person
from tests.agents.conftest import offline  # noqa: F401  (the chat answers with the built-in responder)

pytestmark = pytest.mark.django_db


# --- the findings ---------------------------------------------------------------------------


def test_a_nul_in_a_circle_chat_message_is_not_a_500(alice_client, alice, offline):  # noqa: F811
    circle = circle_create(owner=alice, name="Family")
    for headers in ({}, {"HX-Request": "true"}):
        response = alice_client.post(
            f"/circles/{circle.pk}/chat/send/", {"message": "What did we\x00 plant?"}, headers=headers
        )
        assert response.status_code < 500
    texts = list(CircleMessage.objects.values_list("content", flat=True))
    assert "What did we plant?" in texts
    assert not any("\x00" in text for text in texts)


@pytest.mark.parametrize("until", ["9999-12-31", "9999-01-01", "9001-01-01"])
def test_universe_until_the_last_days_is_a_form_error_not_a_500(alice_client, until):
    page = alice_client.get(f"/universe/?until={until}")
    assert page.status_code == 400
    assert "too far in the future" in page.content.decode()
    graph = alice_client.get(f"/universe/graph.json?until={until}")
    assert graph.status_code == 400
    assert "too far in the future" in json.dumps(graph.json())


def test_universe_up_to_the_latest_year_still_works(alice_client):
    assert alice_client.get("/universe/?since=0001-01-01&until=9000-12-31").status_code == 200
    assert alice_client.get("/universe/graph.json?since=0001-01-01&until=9000-12-31").status_code == 200


# --- control characters -----------------------------------------------------------------------


def test_control_characters_are_dropped_from_a_form_and_the_rest_is_kept(alice_client, alice):
    response = alice_client.post(
        "/people/new/",
        {"display_name": "Da\x00na\x07\x1b", "notes": "Line one\nline\ttwo\r\n\x0cend\x85", "kind": "human"},
    )
    assert response.status_code == 302
    dana = Person.objects.get(owner=alice, display_name="Dana")
    assert dana.notes == "Line one\nline\ttwo\r\nend"


def test_control_characters_are_dropped_from_query_strings(alice_client):
    for url in ("/search/?q=pa%00rk%07", "/?date_from=2024-01-01%00", "/calendar/?month=2024-05%00"):
        assert alice_client.get(url).status_code == 200


def test_the_api_refuses_control_characters_and_names_them(alice):
    _, token = access_token_create(owner=alice, kind=TokenKind.OWNER, name="scripts")
    response = Client().post(
        "/api/v1/people/",
        json.dumps({"display_name": "Dana\x07"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 400
    assert "U+0007" in json.dumps(response.json())
    assert not Person.objects.filter(owner=alice, display_name__startswith="Dana").exists()


# --- the last net ---------------------------------------------------------------------------------


def _failing_view(exception: Exception):
    def view(request):
        raise exception

    return view


@pytest.mark.parametrize("exception", [DataError("value too long"), OverflowError("date value out of range")])
@pytest.mark.parametrize(("path", "json_answer"), [("/api/v1/memories/", True), ("/universe/", False)])
def test_unchecked_input_reaching_the_database_is_a_400_and_logged(caplog, exception, path, json_answer):
    middleware = InputEdgeMiddleware(lambda request: HttpResponse())
    request = RequestFactory().get(path)
    with caplog.at_level(logging.ERROR, logger="config.input_edge"):
        response = middleware.process_exception(request, exception)
    assert response is not None
    assert response.status_code == 400
    if json_answer:
        assert "out of range" in json.loads(response.content)["detail"]
    else:
        assert b"out of range" in response.content
    assert [record.levelno for record in caplog.records] == [logging.ERROR]


def test_other_exceptions_are_not_the_nets():
    middleware = InputEdgeMiddleware(lambda request: HttpResponse())
    assert middleware.process_exception(RequestFactory().get("/"), ValueError("a bug")) is None


# --- found by tests/test_fuzz_every_page.py ---------------------------------------------------


@pytest.mark.parametrize("next_value", ["timeline", "Teatime", "javascript:alert(1)", "//evil.example/"])
def test_sign_up_with_a_next_that_is_not_a_path_goes_to_the_timeline(client, next_value):
    form = {"username": "dana", "password1": "a long Passphrase 42", "password2": "a long Passphrase 42"}
    response = client.post(f"/accounts/signup/?next={next_value}", form)
    assert response.status_code == 302
    assert response["Location"] == "/"
