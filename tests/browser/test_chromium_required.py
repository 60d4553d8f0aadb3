from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import require_chromium


def test_missing_chromium_fails_with_install_instructions(tmp_path: Path):
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install -y chromium"):
        require_chromium(tmp_path / "no-chromium-here")


def test_present_chromium_passes(tmp_path: Path):
    fake = tmp_path / "chromium"
    fake.touch()
    require_chromium(fake)
