"""config.api_views.operation: an endpoint's summary is its docstring, said once."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import path
from drf_spectacular.generators import SchemaGenerator
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api_views import operation


class _EchoApi(APIView):
    @operation("echo_retrieve", {200: None}, request=None)
    def get(self, request, echo_id) -> Response:
        """Say it back,
        on one line

        Then the details: a second paragraph,
        kept as the description."""
        return Response()

    @operation("echo_destroy", {204: None})
    def delete(self, request, echo_id) -> Response:
        """Forget it"""
        return Response(status=204)


def _schema() -> dict:
    patterns = [path("echo/<int:echo_id>/", _EchoApi.as_view())]
    return SchemaGenerator(patterns=patterns).get_schema(request=None, public=True)


def test_the_docstring_is_the_summary_and_its_later_paragraphs_the_description():
    operations = _schema()["paths"]["/echo/{echo_id}/"]
    assert operations["get"]["operationId"] == "echo_retrieve"
    assert operations["get"]["summary"] == "Say it back, on one line"
    assert (
        operations["get"]["description"] == "Then the details: a second paragraph,\nkept as the description."
    )
    assert operations["delete"]["summary"] == "Forget it"
    assert "description" not in operations["delete"]
    assert _EchoApi.get.__doc__ is None  # not printed again as the description


def test_an_endpoint_without_a_docstring_is_refused_at_import():
    with pytest.raises(ImproperlyConfigured, match="docstring is the endpoint's summary"):

        class _Undocumented(APIView):
            @operation("undocumented_list", {200: None})
            def get(self, request) -> Response:
                return Response()
