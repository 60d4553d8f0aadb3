"""Turning an owner's rows into plain JSON values, generically.

Rows are serialised field by field from the model's metadata, so a field added
to a model later is exported without anyone remembering to add it here. Three
kinds of field are never exported: vectors of every kind (full or half
precision: embeddings and the gate's copies of them) and other generated
columns (derived, and large), files (a person's photo: a path on this server,
meaningless elsewhere; the picture itself is not in the JSON export), the `owner`
column (it is always the exporting account), and anything that looks like a
secret (hashes, salts, passwords) — matched by name, so a future secret column is
left out rather than leaked.

References to users are written as usernames: an id from another installation
means nothing, and a user id is not the owner's data.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from decimal import Decimal
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import models
from pgvector.django import BitField, HalfVectorField, SparseVectorField, VectorField

SECRET_FIELD = re.compile(r"(hash|secret|password|salt|digest|private|api_?key|^key$|^token$)", re.IGNORECASE)
VECTOR_FIELDS = VectorField | HalfVectorField | SparseVectorField | BitField
# Django's own and third-party bookkeeping: not the owner's journal data.
FRAMEWORK_APPS = {"admin", "auth", "contenttypes", "sessions", "messages", "staticfiles"}


def exportable_fields(model: type[models.Model]) -> list[models.Field]:
    fields = []
    for field in model._meta.concrete_fields:
        if isinstance(field, VECTOR_FIELDS | models.GeneratedField | models.FileField):
            continue
        if field.name == "owner" or SECRET_FIELD.search(field.name):
            continue
        fields.append(field)
    return fields


class RowSerializer:
    """Serialises rows to dicts; remembers usernames so each is fetched once."""

    def __init__(self) -> None:
        self._usernames: dict[Any, str | None] = {}
        self._user_model = get_user_model()

    def username(self, user_id: Any) -> str | None:
        if user_id is None:
            return None
        if user_id not in self._usernames:
            user = self._user_model.objects.filter(pk=user_id).first()
            self._usernames[user_id] = user.get_username() if user is not None else None
        return self._usernames[user_id]

    def value(self, field: models.Field, obj: models.Model) -> Any:
        raw = getattr(obj, field.attname)
        if field.is_relation and field.related_model is self._user_model:
            return self.username(raw)
        return plain(raw)

    def row(self, obj: models.Model, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        return {
            field.name: self.value(field, obj)
            for field in exportable_fields(type(obj))
            if field.name not in exclude
        }


def plain(value: Any) -> Any:
    """A database value as a JSON value (ISO 8601 for dates, text for ids)."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, bytes | memoryview):
        return None
    return value


def owner_lookup(model: type[models.Model]) -> str | None:
    """How rows of `model` lead to their owner: "owner" or "<fk>__owner", else None."""
    user_model = get_user_model()

    def owned_by_user(field: models.Field) -> bool:
        return field.is_relation and field.name == "owner" and field.related_model is user_model

    relations = [field for field in model._meta.concrete_fields if field.is_relation]
    if any(owned_by_user(field) for field in relations):
        return "owner"
    # One hop (a Message belongs to its Conversation's owner). Only required
    # links count: a nullable one does not make the row the owner's.
    for field in relations:
        related = field.related_model
        if field.null or related is user_model or related is model:
            continue
        if any(owned_by_user(other) for other in related._meta.concrete_fields):
            return f"{field.name}__owner"
    return None


def discovered_models(*, handled: set[type[models.Model]]) -> list[type[models.Model]]:
    """Every other installed model holding rows that belong to an owner."""
    found = []
    for model in apps.get_models():
        meta = model._meta
        if meta.app_label in FRAMEWORK_APPS or meta.app_label == "portability" or model in handled:
            continue
        if owner_lookup(model) is not None:
            found.append(model)
    return sorted(found, key=lambda model: model._meta.label_lower)


def ordering_for(model: type[models.Model]) -> list[str]:
    names = {field.name for field in model._meta.concrete_fields}
    return ["created_at", "pk"] if "created_at" in names else ["pk"]
