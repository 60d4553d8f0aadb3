"""The owner's search page: /search/?q=… (plain and htmx)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories import embeddings
from memories.models import Memory, MemoryParticipant
from people.models import ConsentStatus, Person

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    """The web process may not have the model: search must still answer by full text."""

    def unavailable(text: str) -> list[float]:
        raise OSError("model not installed")

    monkeypatch.setattr(embeddings, "embed_text", unavailable)


def url(query: str | None = None) -> str:
    return reverse("memory_search") + ("" if query is None else f"?q={query}")


def test_search_requires_login(client):
    response = client.get(url("lantern"))

    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_owner_sees_every_match_and_the_ones_agents_cannot_see_are_marked(alice, alice_client):
    bob = Person.objects.create(owner=alice, display_name="Bob", consent_status=ConsentStatus.PENDING)
    hidden = Memory.objects.create(owner=alice, body="Lantern night with Bob")
    MemoryParticipant.objects.create(memory=hidden, person=bob)
    shared = Memory.objects.create(owner=alice, body="Lantern night alone")
    expired = Memory.objects.create(
        owner=alice, body="Lantern market", expires_at=timezone.now() - timedelta(days=1)
    )

    response = alice_client.get(url("lantern"))

    assert response.status_code == 200
    html = response.content.decode()
    assert "3 results" in html
    for item, visible in ((hidden, "false"), (shared, "true"), (expired, "false")):
        assert re.search(rf'data-agent-visible="{visible}">\s*<article[^>]*id="memory-{item.pk}"', html)
    assert "Hidden from agents: Bob (pending)" in html
    assert "Hidden from agents: expired" in html


def test_htmx_request_gets_only_the_results_fragment(alice, alice_client):
    Memory.objects.create(owner=alice, body="Orchard walk")

    response = alice_client.get(url("orchard"), HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="search-results"' in html and "Orchard walk" in html
    assert "<html" not in html and "site-header" not in html


def test_plain_request_gets_the_whole_page(alice, alice_client):
    response = alice_client.get(url("orchard"))

    html = response.content.decode()
    assert "<html" in html and 'id="search-results"' in html


def test_empty_query_shows_a_prompt_and_no_results(alice, alice_client):
    Memory.objects.create(owner=alice, body="Orchard walk")

    for response in (alice_client.get(url()), alice_client.get(url("   "), HTTP_HX_REQUEST="true")):
        html = response.content.decode()
        assert response.status_code == 200
        assert "Type a few words" in html
        assert "Orchard walk" not in html


def test_no_result_state(alice, alice_client):
    Memory.objects.create(owner=alice, body="Orchard walk")

    html = alice_client.get(url("glacier")).content.decode()

    assert "Nothing matches “glacier”" in html


def test_mallory_never_sees_alices_memories(alice, mallory_client):
    Memory.objects.create(owner=alice, body="Alice's lantern secret")

    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        html = mallory_client.get(url("lantern"), **headers).content.decode()
        assert "lantern secret" not in html
        assert "Nothing matches" in html


def test_overlong_query_is_refused_clearly(alice, alice_client):
    response = alice_client.get(url("a" * 501))

    assert response.status_code == 400
    assert "too long" in response.content.decode()


def test_query_that_is_only_punctuation_or_stop_words_is_not_an_error(alice, alice_client):
    Memory.objects.create(owner=alice, body="Orchard walk")

    for query in ("the", "%22%22", "-", "!!!", "'"):
        assert alice_client.get(url(query)).status_code == 200
