"""Shapes every list answer of the API shares."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.utils.urls import replace_query_param


def results_of(item: type[serializers.Serializer], ref_name: str) -> type[serializers.Serializer]:
    """The serializer of `{"results": [item, ...]}`, named `ref_name` in the OpenAPI schema."""
    fields = {"results": item(many=True), "Meta": type("Meta", (), {"ref_name": ref_name})}
    return type(f"{ref_name}Serializer", (serializers.Serializer,), fields)


def page_links(request: Request, *, offset: int, limit: int, count: int) -> tuple[str | None, str | None]:
    """The URLs of the next and the previous page of an offset page (None past either end)."""
    url = request.build_absolute_uri()
    next_url = replace_query_param(url, "offset", offset + limit) if offset + limit < count else None
    previous_url = replace_query_param(url, "offset", max(offset - limit, 0)) if offset else None
    return next_url, previous_url
