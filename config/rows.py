"""Model instances from rows of plain SQL, as the ORM would build them.

For the few statements on a hot path whose ORM form cost more Python to build
(compile the query, resolve select_related) than PostgreSQL took to run: the
search's loading of its results (memories.search.fusion._load) and the token
lookup of every API request (accounts.services). Each field's database
converters are applied as the ORM applies them; tests compare the instances
with the ORM's.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection


def columns(alias: str, fields: Sequence) -> str:
    """The fields' columns of table `alias`, in order: for a SELECT whose row instance() reads."""
    return ", ".join(f'{alias}."{field.column}"' for field in fields)


# id(fields) -> (fields, attnames, converting): looked up by the tuple's identity, since
# hashing a tuple of fields hashes every field (~2 of the ~18 µs a memory's instance
# took; a search's load builds ~30 instances). The tuple is kept, so its id is not reused while listed;
# callers pass module-level tuples, and the map is emptied if it ever grows past 64.
_SHAPES: dict[int, tuple[tuple, list[str], tuple]] = {}


def _row_shape(fields: tuple) -> tuple[list[str], tuple]:
    """(attnames, (position, field, converters) for the fields that have converters), once per field list."""
    shape = _SHAPES.get(id(fields))
    if shape is None or shape[0] is not fields:
        converting = tuple(
            (position, field, tuple(converters))
            for position, field in enumerate(fields)
            if (converters := field.get_db_converters(connection))
        )
        if len(_SHAPES) >= 64:  # a caller building its tuple afresh each time: stay bounded
            _SHAPES.clear()
        shape = _SHAPES[id(fields)] = (fields, [field.attname for field in fields], converting)
    return shape[1], shape[2]


def instance(model, fields: tuple, row: Sequence):
    """`model` built from `row` (the columns() of `fields`, in order), as Model.from_db does for the ORM."""
    attnames, converting = _row_shape(fields)
    values = list(row)
    for position, field, converters in converting:
        for converter in converters:
            values[position] = converter(values[position], field, connection)
    return model.from_db(connection.alias, attnames, values)
