"""API error rendering: services speak Django's ValidationError, clients get 400 JSON."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
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
