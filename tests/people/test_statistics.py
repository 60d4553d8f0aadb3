"""The consent tables are analyzed after a few changes: the gate's plans rest on their statistics."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("table", ["people_person", "people_personconsent"])
def test_autovacuum_analyzes_the_consent_tables_after_a_few_changes(table):
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [table])
        (options,) = cursor.fetchone()
    assert options is not None
    settings = dict(option.split("=", 1) for option in options)
    # PostgreSQL's defaults are 50 and 0.1: a few revocations among hundreds of
    # people would leave the statistics saying every person has granted consent.
    assert int(settings["autovacuum_analyze_threshold"]) <= 10
    assert float(settings["autovacuum_analyze_scale_factor"]) <= 0.02
