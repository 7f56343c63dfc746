"""Start-up as a user sees it: `sgcli lint` wall time, and a warm `sgcli generate` from process
start to its first output byte (model conversion and grammar caches already warm). Runs alternate.

    python benchmarks/startup.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "examples" / "capital.json"


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def lint_wall() -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `sgcli lint` on a small schema."""
    t, cpu = time.perf_counter(), _child_cpu()
    subprocess.run([sys.executable, "-m", "sgcli", "lint", str(SCHEMA)], capture_output=True, env=_env(), check=False)
    return time.perf_counter() - t, _child_cpu() - cpu


def first_byte(extra: list[str]) -> tuple[float, float, float]:
    """(seconds to the first byte on stdout, seconds to exit, CPU seconds in all) for one `sgcli generate`."""
    cmd = [sys.executable, "-m", "sgcli", "generate", "--schema", str(SCHEMA), "-q", *extra]
    t, cpu = time.perf_counter(), _child_cpu()
    proc = subprocess.Popen(
        cmd + ["What is the capital of France?"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env()
    )
    proc.stdout.read(1)
    first = time.perf_counter() - t
    proc.communicate()
    return first, time.perf_counter() - t, _child_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    first_byte([])  # warm: conversion cache, OS file cache
    runs: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for key, value in zip(("lint wall", "lint CPU"), lint_wall()):
            runs.setdefault(key, []).append(value)
        for key, value in zip(("first byte wall", "generate wall", "generate CPU"), first_byte([])):
            runs.setdefault(key, []).append(value)
    for key, values in runs.items():
        print(f"{key}: median {statistics.median(values):.2f} s  {[round(v, 2) for v in values]}")


if __name__ == "__main__":
    main()
