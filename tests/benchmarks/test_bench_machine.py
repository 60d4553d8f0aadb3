"""Every bench names the processor its figures come from (benchmarks.timing.machine)."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.timing import machine


def test_machine_names_the_cpus_and_the_model_this_process_runs_on():
    described = machine()
    count, _, rest = described.partition(" CPUs: ")
    assert int(count) == len(os.sched_getaffinity(0))
    lines = Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines()
    model = next(" ".join(line.partition(":")[2].split()) for line in lines if line.startswith("model name"))
    assert rest.startswith(model), described
    flags = set(next(line for line in lines if line.startswith("flags")).partition(":")[2].split())
    if "avx512f" in flags:
        assert rest.endswith("(AVX-512)"), described
    elif "avx2" in flags:
        assert rest.endswith("(AVX2)"), described


def test_every_bench_that_prints_figures_prints_the_machine():
    commands = Path(__file__).resolve().parents[2] / "benchmarks" / "management" / "commands"
    for command in sorted(commands.glob("bench_*.py")):
        source = command.read_text(encoding="utf-8")
        if "load_average()" in source:
            assert "machine()" in source, f"{command.name} prints a load average but not the machine"
