"""Memory of the whole stack at rest: web, worker, beat, PostgreSQL and Valkey, per process.

Starts what `make run` starts (`python -m config.embedded run`: gunicorn, the
Celery worker and beat, on a free loopback port, against the running embedded
services), waits until the web server answers and then until every process's
memory stops growing (the embedding model is loaded at start), and prints RSS
and PSS per process. PSS divides pages shared between processes (PostgreSQL's
shared buffers, copy-on-write after fork) among them, so the PSS total is what
the stack really holds; RSS counts shared pages once per process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchmarks.timing import load_average, machine
from config.embedded import free_port, wait_until_serving

MIB = 1024 * 1024


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _tree(pid: int) -> list[int]:
    pids, pending = [], [pid]
    while pending:
        current = pending.pop()
        pids.append(current)
        pending += _children(current)
    return pids


def _memory(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in bytes, from smaps_rollup."""
    values = {}
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] in ("Rss:", "Pss:"):
                values[parts[0]] = int(parts[1]) * 1024
    except OSError:
        return 0, 0
    return values.get("Rss:", 0), values.get("Pss:", 0)


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"
    return raw.strip()


def _role(command: str) -> str:
    if "gunicorn" in command:
        return "web (gunicorn)"
    if "celery" in command and " beat" in command:
        return "beat"
    if "celery" in command and " worker" in command:
        return "worker"
    if "postgres" in command:
        return "PostgreSQL"
    if "valkey" in command or "redis-server" in command:
        return "Valkey"
    if "config.embedded" in command:
        return "supervisor (config.embedded run)"
    return "other"


def _service_pids() -> dict[str, list[int]]:
    """This checkout's embedded PostgreSQL (its postmaster, by data directory, and every
    process under it) and Valkey (by port): other instances on the machine are not counted."""
    from config import embedded

    found: dict[str, list[int]] = {"PostgreSQL": [], "Valkey": []}
    postmaster = f"-D {embedded.PG_DATA} "
    valkey = f":{embedded.VALKEY_PORT}"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        command = _command(int(entry.name))
        role = _role(command)
        if role == "PostgreSQL" and postmaster in f"{command} ":
            found[role] += _tree(int(entry.name))
        elif role == "Valkey" and command.endswith(valkey):
            found[role].append(int(entry.name))
    return found


class Command(BaseCommand):
    help = "Start the stack as `make run` does and print RSS and PSS per process at rest."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--settle", type=float, default=5.0, help="seconds memory must stay flat")
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the stack")

    def handle(self, *args, **options) -> None:
        if options["settle"] <= 0 or options["timeout"] <= 0:
            raise CommandError("--settle and --timeout must be positive.")
        port = free_port()
        env = {**os.environ, "KEEPSAKE_HOST": f"127.0.0.1:{port}"}
        stack = subprocess.Popen(
            [sys.executable, "-m", "config.embedded", "run"],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            why = wait_until_serving(port, stack, options["timeout"])
            if why == "exited":
                raise CommandError("The stack exited before serving (see `make run`).")
            if why == "timeout":
                raise CommandError("The web server did not answer in time.")
            own = self._settle(stack.pid, options["settle"], options["timeout"])
            self._report(own)
        finally:
            os.killpg(stack.pid, signal.SIGTERM)
            try:
                stack.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(stack.pid, signal.SIGKILL)

    def _settle(self, root: int, settle: float, timeout: float) -> dict[int, tuple[str, int, int]]:
        """Wait until the stack's total RSS stays within 1% for `settle` seconds; then measure."""
        deadline = time.monotonic() + timeout
        previous, flat_since = -1, time.monotonic()
        while time.monotonic() < deadline:
            pids = _tree(root)
            total = sum(_memory(pid)[0] for pid in pids)
            if previous > 0 and abs(total - previous) <= previous * 0.01:
                if time.monotonic() - flat_since >= settle:
                    break
            else:
                flat_since = time.monotonic()
            previous = total
            time.sleep(1.0)
        return {pid: (_role(_command(pid)), *_memory(pid)) for pid in _tree(root)}

    def _report(self, own: dict[int, tuple[str, int, int]]) -> None:
        rows: dict[str, list[int]] = {}
        for role, rss, pss in own.values():
            row = rows.setdefault(role, [0, 0, 0])
            row[0] += 1
            row[1] += rss
            row[2] += pss
        for role, pids in _service_pids().items():
            row = rows.setdefault(role, [0, 0, 0])
            for pid in pids:
                rss, pss = _memory(pid)
                row[0] += 1
                row[1] += rss
                row[2] += pss
        self.stdout.write(f"{machine()}. Load average: {load_average()}\n")
        self.stdout.write(f"{'process':<34} {'count':>5} {'RSS MiB':>9} {'PSS MiB':>9}")
        for role, (count, rss, pss) in rows.items():
            self.stdout.write(f"{role:<34} {count:>5} {rss / MIB:9.0f} {pss / MIB:9.0f}")
        total_pss = sum(row[2] for row in rows.values())
        self.stdout.write(
            f"{'total':<34} {'':>5} {sum(row[1] for row in rows.values()) / MIB:9.0f} {total_pss / MIB:9.0f}"
        )
        self.stdout.write(
            f"Whole stack at rest: {total_pss / MIB / 1024:.2f} GiB PSS (goal: at most 1.5 GiB)."
        )
