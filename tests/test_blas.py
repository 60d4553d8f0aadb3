"""numpy's matrix products run on one thread in every process that loads the app (config/blas.py)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_process_that_loads_the_app_limits_its_blas_library_to_one_thread():
    code = (
        "import django; django.setup(); from threadpoolctl import threadpool_info; "
        "print([(info['internal_api'], info['num_threads']) for info in threadpool_info() "
        "if info['user_api'] == 'blas'])"
    )
    # Nothing from outside chooses for it: without the limit OpenBLAS takes every core.
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}
    }
    environment["DJANGO_SETTINGS_MODULE"] = "config.settings"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    libraries = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert libraries, "numpy's BLAS library was not found"
    assert all(threads == 1 for _, threads in libraries), libraries


def test_without_the_limit_the_library_would_take_more_than_one_thread_here():
    """What the test above guards against, on this machine (skipped on one core)."""
    import pytest

    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: OpenBLAS takes one thread anyway")
    code = (
        "import numpy; from threadpoolctl import threadpool_info; "
        "print(max(info['num_threads'] for info in threadpool_info() if info['user_api'] == 'blas'))"
    )
    environment = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) > 1
