"""DRF building blocks for refusing bad input with a 400 instead of a 500."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from config.input_edge import CONTROL_CHARACTERS
from config.limits import JSON_MAX_DEPTH, text_problem


def _depth_exceeded(text: str, limit: int) -> bool:
    """True when brackets nest deeper than `limit` (strings skipped), checked before json.loads recurses."""
    depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


class DepthLimitedJSONParser(JSONParser):
    """JSONParser that answers 400 for bodies nested too deeply (json.loads would hit RecursionError)."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        # The character scan only runs when there are enough brackets to matter.
        brackets = text.count("[") + text.count("{")
        if brackets > JSON_MAX_DEPTH and _depth_exceeded(text, JSON_MAX_DEPTH):
            raise ParseError(f"JSON parse error - nested more than {JSON_MAX_DEPTH} levels deep.")
        try:
            return json.loads(text, parse_constant=_refuse_constant)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply.") from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


class StrictCharField(serializers.CharField):
    """A CharField that takes only JSON strings: 12345 or 1e999 is a 400, never coerced into text."""

    default_error_messages = {
        **serializers.CharField.default_error_messages,
        "not_a_string": "Must be a string (text in quotes), not {input_type}.",
    }

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string", input_type=type(data).__name__)
        # PostgreSQL cannot store NUL or an unpaired surrogate in text: say so instead of a 500.
        problem = text_problem(data)
        if problem is not None:
            raise serializers.ValidationError(f"Text {problem}")
        # The other control characters are storable but never meant: refused, and named
        # (web forms drop them at the edge instead, config/input_edge.py).
        control = CONTROL_CHARACTERS.search(data)
        if control is not None:
            raise serializers.ValidationError(
                f"Text must not contain control characters (found U+{ord(control.group()):04X}); "
                "tab, line feed and carriage return are fine."
            )
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A BooleanField that takes only JSON true or false: "yes", 1 or "on" is a 400, never guessed."""

    default_error_messages = {
        **serializers.BooleanField.default_error_messages,
        "not_a_boolean": "Must be true or false, not {input_type}.",
    }

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("not_a_boolean", input_type=type(data).__name__)
        return data


def validated(serializer: serializers.Serializer) -> dict:
    """The serializer's validated data; invalid input raises DRF's ValidationError (a 400)."""
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data
