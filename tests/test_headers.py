from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from agents.services import agent_create
from circles.services import circle_create
from tests.factories import MemoryFactory, ParticipantFactory, PersonFactory, UserFactory

pytestmark = pytest.mark.django_db

EVENT_HANDLER_ATTRIBUTE = re.compile(r"^(on[a-z]+|hx-on.*|data-hx-on.*)$")


class InlineCodeFinder(HTMLParser):
    """Collects what a CSP without 'unsafe-inline' would refuse: inline scripts,
    event-handler and hx-on attributes (htmx evaluates those), <style> elements
    and style attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {name for name, _ in attrs}
        if tag == "script" and "src" not in names:
            # A JSON data block (json_script) is never executed, so the CSP allows it.
            if dict(attrs).get("type") != "application/json":
                self.found.append("<script> without src")
        if tag == "style":
            self.found.append("<style> element")
        for name in names:
            if EVENT_HANDLER_ATTRIBUTE.match(name):
                self.found.append(f"<{tag} {name}=…>")
            if name == "style":
                self.found.append(f"<{tag} style=…>")


def inline_code(html: str) -> list[str]:
    finder = InlineCodeFinder()
    finder.feed(html)
    finder.close()
    return finder.found


def csp_directives(header: str) -> dict[str, list[str]]:
    directives = {}
    for part in header.split(";"):
        name, *values = part.split()
        directives[name] = values
    return directives


@pytest.fixture
def alice_client() -> tuple[Client, dict[str, str]]:
    """Alice signed in, with one of everything, and the URL of each main page."""
    alice = UserFactory(username="alice")
    bob = PersonFactory(owner=alice, display_name="Bob")
    memory = MemoryFactory(owner=alice, body="Walked with Bob by the river.")
    ParticipantFactory(memory=memory, person=bob)
    circle = circle_create(owner=alice, name="Family")
    agent = agent_create(owner=alice, name="Helper", instructions="Be brief.")
    client = Client()
    client.force_login(alice)
    pages = {
        "timeline": reverse("timeline"),
        "memory": reverse("memory_detail", args=[memory.pk]),
        "people": reverse("person_list"),
        "person": reverse("person_detail", args=[bob.pk]),
        "circles": reverse("circle_list"),
        "circle": reverse("circle_detail", args=[circle.pk]),
        "agents": reverse("agent_list"),
        "chat": reverse("agent_chat", args=[agent.pk]),
        "search": reverse("memory_search") + "?q=river",
        "settings": reverse("settings"),
        "inbox": reverse("inbox"),
        "my consents": reverse("my_consents"),
        "api docs": reverse("api-docs"),
    }
    return client, pages


def assert_security_headers(response) -> None:
    csp = csp_directives(response["Content-Security-Policy"])
    assert csp["script-src"] == ["'self'"]
    assert csp["style-src"] == ["'self'"]
    assert csp["default-src"] == ["'self'"]
    assert csp["object-src"] == ["'none'"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["base-uri"] == ["'self'"]
    assert csp["form-action"] == ["'self'"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert "camera=()" in response["Permissions-Policy"]
    assert "microphone=()" in response["Permissions-Policy"]
    assert "geolocation=()" in response["Permissions-Policy"]
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def test_every_main_page_sends_the_security_headers_and_no_inline_code(alice_client) -> None:
    client, pages = alice_client
    for name, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, name
        assert_security_headers(response)
        assert inline_code(response.content.decode()) == [], name


@pytest.mark.parametrize("url_name", ["login", "signup"])
def test_signed_out_pages_send_the_security_headers_and_no_inline_code(client, url_name) -> None:
    response = client.get(reverse(url_name))
    assert response.status_code == 200
    assert_security_headers(response)
    assert inline_code(response.content.decode()) == []


def test_htmx_fragments_carry_no_inline_code(alice_client) -> None:
    client, pages = alice_client
    for name in ["timeline", "search"]:
        response = client.get(pages[name], HTTP_HX_REQUEST="true")
        assert response.status_code == 200, name
        assert inline_code(response.content.decode()) == [], name


def test_a_new_invite_link_has_a_copy_button_without_inline_code(alice_client) -> None:
    client, pages = alice_client
    circle_id = pages["circle"].rstrip("/").rsplit("/", 1)[-1]
    url = reverse("circle_invite_create", args=[circle_id])
    for headers in [{}, {"HTTP_HX_REQUEST": "true"}]:
        response = client.post(url, {"days": 7}, **headers)
        html = response.content.decode()
        assert 'data-copy-target="#new-invite-url"' in html
        assert inline_code(html) == []


def test_api_docs_load_their_init_script_from_a_url(alice_client) -> None:
    client, pages = alice_client
    html = client.get(pages["api docs"]).content.decode()
    script = re.search(r'<script src="([^"]*script=[^"]*)"', html)
    assert script is not None
    response = client.get(script.group(1).replace("&amp;", "&"))
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in response.content.decode()


def test_json_api_responses_carry_the_policy_too(alice_client) -> None:
    client, _ = alice_client
    response = client.get(reverse("api-schema"))
    assert "Content-Security-Policy" in response


def test_the_inline_code_finder_sees_what_the_policy_would_refuse() -> None:
    html = (
        "<script>alert(1)</script><script src='/static/x.js'></script>"
        '<button onclick="x()">a</button><form hx-on::after-request="x()"></form>'
        '<p style="color: red">b</p><script type="application/json">{}</script>'
    )
    assert inline_code(html) == [
        "<script> without src",
        "<button onclick=…>",
        "<form hx-on::after-request=…>",
        "<p style=…>",
    ]
