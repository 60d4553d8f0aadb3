"""The embedded development services and the commands' behaviour around them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from config import embedded

ROOT = Path(__file__).resolve().parent.parent


def test_manage_py_says_how_to_start_when_the_database_is_not_running(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    environment["KEEPSAKE_DATA_DIR"] = str(tmp_path)  # no server has ever run here
    result = subprocess.run(
        [sys.executable, "manage.py", "showmigrations"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "database is not running" in result.stderr
    assert "make run" in result.stderr


def test_embedded_postgres_address_is_read_from_its_pid_file():
    if os.environ.get("DATABASE_URL"):
        pytest.skip("the suite runs against an external server; nothing embedded to read")
    address = embedded.postgres_address()
    assert address is not None
    assert settings.DATABASES["default"]["HOST"] == address.socket_dir


def test_stale_pid_file_reads_as_not_running(tmp_path, monkeypatch):
    pg_data = tmp_path / "pg"
    pg_data.mkdir()
    # A pid that cannot be alive (above the kernel's maximum).
    (pg_data / "postmaster.pid").write_text("99999999\n/x\n0\n5432\n/tmp\n")
    monkeypatch.setattr(embedded, "PG_DATA", pg_data)
    assert embedded.postgres_address() is None


def test_postgres_memory_settings_scale_with_the_machine(monkeypatch):
    from config.embedded import postgres_settings

    monkeypatch.delenv("KEEPSAKE_PG_SHARED_BUFFERS", raising=False)
    gib = 1024**3
    small, medium, large = postgres_settings(2 * gib), postgres_settings(8 * gib), postgres_settings(24 * gib)
    assert postgres_settings(1 * gib)["shared_buffers"] == "128MB"  # never below initdb's default
    assert small["shared_buffers"] == "170MB"
    assert medium["shared_buffers"] == "682MB"
    assert large["shared_buffers"] == "2048MB"  # capped
    assert postgres_settings(256 * gib)["shared_buffers"] == "2048MB"
    assert small["maintenance_work_mem"] == "85MB" and large["maintenance_work_mem"] == "1024MB"
    monkeypatch.setenv("KEEPSAKE_PG_SHARED_BUFFERS", "512MB")
    assert postgres_settings(24 * gib)["shared_buffers"] == "512MB"


@pytest.mark.parametrize(
    ("variable", "flag", "default", "other"),
    [("KEEPSAKE_WEB_WORKERS", "--workers", "2", "3"), ("KEEPSAKE_WEB_THREADS", "--threads", "4", "2")],
)
def test_web_server_runs_as_many_processes_and_threads_as_the_environment_says(
    monkeypatch, variable, flag, default, other
):
    def value() -> str:
        command = embedded.web_command("127.0.0.1:8000")
        return command[command.index(flag) + 1]

    monkeypatch.delenv(variable, raising=False)
    assert value() == default
    monkeypatch.setenv(variable, other)
    assert value() == other
    for bad in ("two", "0", "-1", "65", "1000"):
        monkeypatch.setenv(variable, bad)
        with pytest.raises(SystemExit, match=variable):
            embedded.web_command("127.0.0.1:8000")
