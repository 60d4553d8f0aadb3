"""API error rendering: services speak Django's ValidationError, clients get 400 JSON."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's handler, plus services' ValidationError as a 400 with field errors.

    Services validate for every surface (HTML views, API, MCP); without this a
    rule enforced only there would surface as a 500 here.
    """
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            detail = {
                ("non_field_errors" if field == "__all__" else field): messages
                for field, messages in exc.message_dict.items()
            }
        else:
            detail = {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(detail)
    return exception_handler(exc, context)


class ErrorSerializer(serializers.Serializer):
    """The body of every non-validation error: 401, 403, 404, 409."""

    detail = serializers.CharField()

    class Meta:
        ref_name = "Error"


def error_response(description: str) -> OpenApiResponse:
    return OpenApiResponse(ErrorSerializer, description=description)


# What every API that agent tokens may only read answers them for a write.
AGENT_FORBIDDEN = error_response("Agent tokens cannot write.")


# A 400 body maps each field (or "non_field_errors") to its messages.
VALIDATION_ERROR = OpenApiResponse(
    {"type": "object", "additionalProperties": True},
    description="Invalid input: a JSON object mapping each field to a list of messages.",
)


def document_authentication_errors(result: dict, generator: object, request: object, public: bool) -> dict:
    """drf-spectacular hook: every authenticated operation may answer 401."""
    unauthorized = {
        "description": "No valid credentials: the token is missing, unknown, malformed or revoked.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    for path in result.get("paths", {}).values():
        for operation in path.values():
            if operation.get("security"):
                operation["responses"].setdefault("401", unauthorized)
    return result
