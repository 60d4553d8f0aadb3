"""bench_isolation runs an owner's searches on two databases in turn (a smoke test, not a measurement).

The test has one database, so both sides are it, on two connections: the command's
plumbing (connections and search hints kept apart, every line, recall) is what is
checked. Transactional: the command's connection to the "alone" side must see the
seeded owner, and the bench vacuums.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, connections

from benchmarks.management.commands.bench_isolation import _Database
from memories import retrieval
from memories.search import hints

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_database_side_has_its_own_connection_and_its_own_hints():
    name = connection.settings_dict["NAME"]
    side = _Database(name)
    try:
        ours = connections["default"]
        hints._OPEN_COUNTS[-1] = (0.0, 7)
        with side.active():
            assert connections["default"] is side.connection and side.connection is not ours
            assert -1 not in hints._OPEN_COUNTS  # this side's hints, empty so far
            hints._OPEN_COUNTS[-2] = (0.0, 9)
            with connection.cursor() as cursor:
                cursor.execute("SELECT current_database(), pg_backend_pid()")
                database, pid = cursor.fetchone()
        assert database == name
        assert connections["default"] is ours
        assert hints._OPEN_COUNTS == {-1: (0.0, 7)}
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone()[0] != pid
        with side.active():
            assert hints._OPEN_COUNTS == {-2: (0.0, 9)}
    finally:
        side.connection.close()
        retrieval.forget_hints()


def test_bench_isolation_prints_both_sides_their_ratio_and_recall_for_each_line():
    call_command("bench_retrieval", owner="iso", memories=300, gated="none", queries=3, stdout=StringIO())
    helper = settings.SEARCH_SIDES_IN_PARALLEL
    out = StringIO()
    call_command(
        "bench_isolation",
        alone=connection.settings_dict["NAME"],
        owner="iso",
        memories=300,
        gated="0.5,0.9",
        queries=6,
        stdout=out,
    )
    text = out.getvalue()
    assert "no search helper" in text
    assert settings.SEARCH_SIDES_IN_PARALLEL == helper  # switched off for the run only
    rows = {
        (match["fraction"], match["label"].strip()): match
        for match in re.finditer(
            r"^\s*(?P<fraction>[-0-9.]+) (?P<label>[a-z ]+?)\s+(?P<alone>[0-9.]+)\s+[0-9.]+"
            r"\s+(?P<among>[0-9.]+)\s+[0-9.]+\s+(?P<ratio>[0-9.]+)\s+[0-9.]+"
            r"\s+(?P<recall_alone>[0-9.]+) / (?P<recall_among>[0-9.]+)$",
            text,
            re.MULTILINE,
        )
    }
    expected = {("-", "owner knn"), ("-", "owner hybrid")} | {
        (fraction, label) for fraction in ("0.50", "0.90") for label in ("agent knn", "agent hybrid")
    }
    assert set(rows) == expected, text
    for row in rows.values():
        # A 300-memory owner is searched exactly: every answer right, on either side.
        assert float(row["recall_alone"]) == float(row["recall_among"]) == 1.0
        assert float(row["ratio"]) > 0


def test_bench_isolation_says_how_to_seed_an_owner_it_cannot_find():
    with pytest.raises(CommandError, match="seed it with `bench_retrieval --owner ghost --memories 1000`"):
        call_command(
            "bench_isolation", alone=connection.settings_dict["NAME"], owner="ghost", stdout=StringIO()
        )


def test_bench_isolation_says_so_when_the_alone_database_is_not_there():
    with pytest.raises(CommandError, match="Cannot use the database 'no_such_keepsake'"):
        call_command("bench_isolation", alone="no_such_keepsake", stdout=StringIO())
