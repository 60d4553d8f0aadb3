"""`make test` keeps an xdist_group's tests on one worker (tests/conftest.py, _name_groups).

A module whose fixtures build something big or start a server once (test_plans' world, the
ONNX model, a PostgreSQL to restart) is marked with xdist_group; `--dist loadgroup` sends
every test whose id ends in "@<group>" to the same worker. When the name is missing from the
ids, the group is split and each worker builds it again, silently.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.xdist_group("suite_groups")


def test_a_grouped_test_carries_its_group_in_its_id_under_loadgroup(request):
    if "PYTEST_XDIST_WORKER" not in os.environ or not request.config.getvalue("loadgroup"):
        pytest.skip("only `make test`'s --dist loadgroup names the groups")
    assert request.node.nodeid.endswith(
        "::test_a_grouped_test_carries_its_group_in_its_id_under_loadgroup@suite_groups"
    )
