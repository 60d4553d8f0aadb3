"""View shapes several APIs share (one place each, however many resources use them)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


def api_base(name: str, tag: str, *permissions: type[BasePermission]) -> type[APIView]:
    """The base of one API's views: their tag in the schema, and what they allow beyond signing in."""
    view = type(name, (APIView,), {"permission_classes": [*APIView.permission_classes, *permissions]})
    return extend_schema(tags=[tag])(view)


def operation(
    operation_id: str, responses: dict, *, request: Any = empty, parameters: list | None = None
) -> Callable[[Callable], Callable]:
    """Documents one endpoint (a view's method) in the schema: its `operation_id`, what it answers
    (`responses`, status to serializer or error), its body (`request`; None: it takes none) and its
    query `parameters`. The summary is the method's docstring, its first paragraph on one line; the
    paragraphs after it, if any, are the operation's description. The docstring is taken off the
    method, which drf-spectacular would otherwise print whole as the description."""

    def document(method: Callable) -> Callable:
        summary, _, description = inspect.cleandoc(method.__doc__ or "").partition("\n\n")
        if not summary:
            raise ImproperlyConfigured(f"{method.__qualname__}: its docstring is the endpoint's summary.")
        method.__doc__ = None
        return extend_schema(
            operation_id=operation_id,
            summary=" ".join(summary.split()),
            description=description or None,
            request=request,
            responses=responses,
            parameters=parameters,
        )(method)

    return document


# PUT replaces a resource (its whole InputSerializer), PATCH changes the fields it is given:
# `update(request, partial=..., **ids)` answers both, with the ids from the URL. (No docstring:
# drf-spectacular would print it on every operation of every view built on it.)
class ReplaceOrChangeApi(APIView):
    InputSerializer: type[serializers.Serializer]

    def put(self, request: Request, **ids: object) -> Response:
        return self.update(request, partial=False, **ids)

    def patch(self, request: Request, **ids: object) -> Response:
        return self.update(request, partial=True, **ids)

    def update(self, request: Request, *, partial: bool, **ids: object) -> Response:
        raise NotImplementedError


def replace_or_change_schema(
    operation: str, replace: str, change: str, *, ok: type[serializers.Serializer], errors: dict
) -> Callable[[type[ReplaceOrChangeApi]], type[ReplaceOrChangeApi]]:
    """Documents a ReplaceOrChangeApi's PUT (`<operation>_update`, summary `replace`) and PATCH
    (`<operation>_partial_update`, summary `change`): the view's InputSerializer, whole or in part;
    the changed resource (`ok`) or the same `errors`."""

    def document(view: type[ReplaceOrChangeApi]) -> type[ReplaceOrChangeApi]:
        def method(name: str, summary: str, body: serializers.Serializer | type) -> Callable:
            responses: dict[int, OpenApiResponse | type] = {200: ok, **errors}
            return extend_schema(
                operation_id=f"{operation}_{name}", summary=summary, request=body, responses=responses
            )

        return extend_schema_view(
            put=method("update", replace, view.InputSerializer),
            patch=method("partial_update", change, view.InputSerializer(partial=True)),
        )(view)

    return document
