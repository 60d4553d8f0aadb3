"""Photos are written under a temporary MEDIA_ROOT per test: nothing reaches .data/."""

from __future__ import annotations

import pytest

from tests.circles.conftest import bob, family  # noqa: F401 (Bob in Alice's circle "Family")


@pytest.fixture(autouse=True)
def photo_store(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT / "attachments"
