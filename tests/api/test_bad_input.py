"""Hostile or broken requests get a clear 4xx JSON answer and change nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from memories.models import Memory
from people.models import Person


@pytest.mark.parametrize(
    ("method", "url", "body", "content_type", "status", "field"),
    [
        ("post", "/api/v1/people/", '{"display_name": "A\\ud800B"}', "application/json", 400, "display_name"),
        ("post", "/api/v1/people/", '{"display_name": ', "application/json", 400, "detail"),
        ("post", "/api/v1/people/", "display_name=Eve", "text/plain", 415, "detail"),
        ("post", "/api/v1/people/", "[1, 2]", "application/json", 400, "non_field_errors"),
        (
            "post",
            "/api/v1/memories/",
            '{"body": "x", "occurred_at": "0001-01-01T00:00:00+14:00"}',
            "application/json",
            400,
            "occurred_at",
        ),
        (
            "post",
            "/api/v1/memories/",
            '{"body": "x", "participants": [null]}',
            "application/json",
            400,
            "participants",
        ),
        ("post", "/api/v1/memories/", '{"body": "' + "x" * 50_001 + '"}', "application/json", 400, "body"),
        ("delete", "/api/v1/people/", "", "application/json", 405, "detail"),
    ],
)
def test_broken_requests_are_clear_4xx_and_write_nothing(
    world, method, url, body, content_type, status, field
) -> None:
    before = (Person.objects.count(), Memory.objects.count())

    response = getattr(Client(), method)(
        url, data=body, content_type=content_type, headers={"Authorization": f"Bearer {world.owner_token}"}
    )

    assert response.status_code == status
    assert field in response.json()
    assert (Person.objects.count(), Memory.objects.count()) == before


@pytest.mark.parametrize(
    "query",
    ["q=a%ED%A0%80%FF", "q=a%00b", "q=%22unclosed&limit=3", "q=-&limit=1", "q=%26%7C%21%28%29%3A%2A"],
)
def test_odd_search_strings_never_break_search(world, query) -> None:
    response = Client().get(
        f"/api/v1/memories/search/?{query}", headers={"Authorization": f"Bearer {world.owner_token}"}
    )

    assert response.status_code in (200, 400)
    assert set(response.json()) == ({"results", "consent_gated"} if response.status_code == 200 else {"q"})
