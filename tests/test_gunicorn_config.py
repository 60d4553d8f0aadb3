"""The web worker's start hook: how long a thread waits for the Python lock."""

from __future__ import annotations

import gc
import sys

import pytest

from config import gunicorn as gunicorn_config


@pytest.fixture
def switch_interval():
    interval = sys.getswitchinterval()
    yield
    sys.setswitchinterval(interval)
    gc.unfreeze()  # the hook also freezes what the process holds (tests/test_gc_freeze.py)


def test_web_workers_hand_the_python_lock_over_every_millisecond_unless_told(monkeypatch, switch_interval):
    monkeypatch.delenv("KEEPSAKE_WEB_SWITCH_INTERVAL_MS", raising=False)
    assert gunicorn_config.gil_switch_interval() == pytest.approx(0.001)
    monkeypatch.setenv("KEEPSAKE_WEB_SWITCH_INTERVAL_MS", "5")
    assert gunicorn_config.gil_switch_interval() == pytest.approx(0.005)  # Python's own
    for bad in ("fast", "0", "0.05", "101", "nan", "-1"):
        monkeypatch.setenv("KEEPSAKE_WEB_SWITCH_INTERVAL_MS", bad)
        with pytest.raises(SystemExit, match="KEEPSAKE_WEB_SWITCH_INTERVAL_MS"):
            gunicorn_config.gil_switch_interval()


def test_the_start_hook_sets_the_interval_in_the_worker(monkeypatch, switch_interval):
    monkeypatch.setenv("KEEPSAKE_WEB_SWITCH_INTERVAL_MS", "2")
    sys.setswitchinterval(0.005)
    gunicorn_config.post_worker_init(None)
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_wrong_interval_stops_the_server_before_any_worker_starts(monkeypatch):
    monkeypatch.setenv("KEEPSAKE_WEB_SWITCH_INTERVAL_MS", "soon")
    with pytest.raises(SystemExit, match="KEEPSAKE_WEB_SWITCH_INTERVAL_MS"):
        gunicorn_config.on_starting(None)
    monkeypatch.setenv("KEEPSAKE_WEB_SWITCH_INTERVAL_MS", "1")
    gunicorn_config.on_starting(None)  # a right one: nothing to say
