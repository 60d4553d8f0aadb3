"""Shapes every list answer of the API shares."""

from __future__ import annotations

from rest_framework import serializers


def results_of(item: type[serializers.Serializer], ref_name: str) -> type[serializers.Serializer]:
    """The serializer of `{"results": [item, ...]}`, named `ref_name` in the OpenAPI schema."""
    fields = {"results": item(many=True), "Meta": type("Meta", (), {"ref_name": ref_name})}
    return type(f"{ref_name}Serializer", (serializers.Serializer,), fields)
