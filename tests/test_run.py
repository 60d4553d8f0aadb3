"""`make run`'s supervisor: web, worker and beat come up together; Ctrl-C stops all.

The web and worker processes load the embedding model as they start, and say so,
before the web server answers its first request.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from config import embedded
from tests.conftest import OWN_DB, broker_url_with_db, suite_redis_db

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="exercises the embedded services")
def test_run_serves_the_app_and_ctrl_c_stops_every_process():
    port = embedded.free_port()
    environment = dict(os.environ)
    environment["KEEPSAKE_HOST"] = f"127.0.0.1:{port}"
    # Its own broker database: this worker must not take anyone else's tasks.
    environment["REDIS_URL"] = broker_url_with_db(embedded.valkey_url(), suite_redis_db(OWN_DB))
    process = subprocess.Popen(
        [sys.executable, "-m", "config.embedded", "run"],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, like a terminal's
    )
    lines: list[str] = []

    def read_output() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            lines.append(raw.decode(errors="replace"))

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()

    def wait_for_line(text: str, timeout: float = 300) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for index, line in enumerate(list(lines)):
                if text in line:
                    return index
            time.sleep(0.5)
        raise AssertionError(f"no {text!r} in the output:\n" + "".join(lines)[-3000:])

    try:
        status = None
        # Generous: migrations, then the model load before the first answer (slow on a busy machine).
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and status is None:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/accounts/login/", timeout=2
                ) as response:
                    status = response.status
            except OSError:
                time.sleep(0.5)
        assert status == 200, "".join(lines)[-3000:]
        # DEBUG is off by default: static files come from WhiteNoise, errors are the friendly pages.
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/static/css/keepsake.css", timeout=5
        ) as response:
            assert response.status == 200 and b".site-header" in response.read()
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/no-such-page/", timeout=5)
        except urllib.error.HTTPError as error:
            page = error.read().decode()
            assert error.code == 404 and "Traceback" not in page and "settings" not in page.lower()
        else:
            raise AssertionError("an unknown page answered 200")
        children = psutil.Process(process.pid).children(recursive=True)
        commands = [" ".join(child.cmdline()) for child in children]
        assert any("gunicorn" in command and "config.wsgi:application" in command for command in commands)
        assert any("celery" in command and " worker" in command for command in commands)
        assert any("celery" in command and " beat" in command for command in commands)

        assert any("celery,embeddings_bulk" in command for command in commands)  # both queues

        # The model was loaded before the first request was answered (gunicorn's
        # access log line), and the worker's pool process loads it too.
        # "Embedding model all-MiniLM-L6-v2 (ONNX Runtime, …) loaded in the web process …"
        web_loaded = wait_for_line(") loaded in the web process")
        first_request = wait_for_line('"GET /accounts/login/')
        assert web_loaded < first_request
        wait_for_line(") loaded in the worker process")

        os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does
        process.wait(timeout=60)
        reader.join(timeout=10)
        output = "".join(lines)
        assert process.returncode == 0, output[-2000:]
        assert "Stopped." in output
        assert not [child for child in children if child.is_running() and child.status() != "zombie"]
        # The shared database server was already running: it is left running.
        assert embedded.postgres_address() is not None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
