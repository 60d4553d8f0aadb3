"""Shapes every list answer of the API shares."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.utils.urls import replace_query_param


def named_serializer(ref_name: str, **fields: serializers.Field) -> type[serializers.Serializer]:
    """A serializer of `fields`, in their order, named `ref_name` in the OpenAPI schema."""
    attrs = {**fields, "Meta": type("Meta", (), {"ref_name": ref_name})}
    return type(f"{ref_name}Serializer", (serializers.Serializer,), attrs)


def results_of(item: type[serializers.Serializer], ref_name: str) -> type[serializers.Serializer]:
    """The serializer of `{"results": [item, ...]}`, named `ref_name` in the OpenAPI schema."""
    return named_serializer(ref_name, results=item(many=True))


def page_of(item: type[serializers.Serializer], ref_name: str) -> type[serializers.Serializer]:
    """The serializer of an offset page of `item`s (with its `page_links`), named `ref_name` in the schema.

    A page with more to say subclasses it: DRF puts a subclass's fields after these.
    """
    return named_serializer(
        ref_name,
        count=serializers.IntegerField(),
        next=serializers.URLField(allow_null=True),
        previous=serializers.URLField(allow_null=True),
        results=item(many=True),
    )


def page_links(request: Request, *, offset: int, limit: int, count: int) -> tuple[str | None, str | None]:
    """The URLs of the next and the previous page of an offset page (None past either end)."""
    url = request.build_absolute_uri()
    next_url = replace_query_param(url, "offset", offset + limit) if offset + limit < count else None
    previous_url = replace_query_param(url, "offset", max(offset - limit, 0)) if offset else None
    return next_url, previous_url
