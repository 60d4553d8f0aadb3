"""Every table that holds one owner's data carries `owner_id`, or is a documented exception.

The path beyond one machine (docs/operations.md, "Scaling out") partitions by owner and then
distributes by owner: a table can follow its owner only if it says who that is.
The exceptions below are the ones docs/operations.md names, each with why.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.apps import apps
from django.db import connection

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent


def project_app_labels() -> set[str]:
    """The project's own apps (not Django's or third-party ones): those under the repository."""
    return {
        config.label
        for config in apps.get_app_configs()
        if Path(config.path).is_relative_to(ROOT) and ".venv" not in Path(config.path).parts
    }


# Table -> the column that scopes it instead, and why it has no owner_id of its own.
EXCEPTIONS = {
    "people_personconsent": ("person_id", "one row per person and audience; read with its person"),
    "people_personlinkinvite": ("person_id", "one row per link invitation; read with its person"),
    "memories_memoryparticipant": ("memory_id", "read with its memory; the first column to denormalise"),
    "agents_message": ("conversation_id", "read with its conversation, which carries owner_id"),
    "portability_importeditem": ("job_id", "read with its import job, which carries owner_id"),
    "insights_insightsource": ("insight_id", "read with its insight memory, which carries owner_id"),
    "circles_circlemembership": ("circle_id", "circle-scoped: a circle spans several owners"),
    "circles_circleinvite": ("circle_id", "circle-scoped: a circle spans several owners"),
    "circles_joinrequest": ("circle_id", "circle-scoped: a circle spans several owners"),
    "circles_circleconversation": ("circle_id", "circle-scoped: a circle spans several owners"),
    "circles_circlemessage": ("conversation_id", "circle-scoped, read with its conversation"),
    "inbox_notification": ("recipient_id", "scoped by the recipient, who is the owner of the inbox"),
}


def project_tables() -> dict[str, list[str]]:
    labels = project_app_labels()
    assert {"memories", "people", "circles"} <= labels
    tables = {}
    with connection.cursor() as cursor:
        for model in apps.get_models():
            if model._meta.app_label not in labels or not model._meta.managed:
                continue
            description = connection.introspection.get_table_description(cursor, model._meta.db_table)
            tables[model._meta.db_table] = [column.name for column in description]
    return tables


def test_every_project_table_carries_owner_id_or_is_a_documented_exception():
    tables = project_tables()
    assert "memories_memory" in tables and "people_person" in tables
    missing = sorted(
        table for table, columns in tables.items() if "owner_id" not in columns and table not in EXCEPTIONS
    )
    assert missing == [], f"tables without owner_id and without a documented reason: {missing}"


def test_each_exception_is_scoped_by_the_column_it_names_and_still_needs_the_exception():
    tables = project_tables()
    for table, (column, _why) in EXCEPTIONS.items():
        assert table in tables, f"{table} no longer exists: drop its exception"
        assert column in tables[table], f"{table} has no {column}"
        assert "owner_id" not in tables[table], f"{table} now has owner_id: drop its exception"


def test_the_operations_guide_names_every_exception():
    operations = (ROOT / "docs" / "operations.md").read_text()
    section = operations.split("\n## Scaling out\n", 1)[1].split("\n## ", 1)[0]
    for table in EXCEPTIONS:
        assert f"`{table}`" in section, f"docs/operations.md's Scaling out section does not name {table}"
