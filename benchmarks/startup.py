"""Start-up as a user sees it: `sgcli lint` wall time, and a warm `sgcli generate` from process
start to its first output byte (model conversion and grammar caches already warm). Runs alternate.

    python benchmarks/startup.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "examples" / "capital.json"


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def lint_wall() -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sgcli", "lint", str(SCHEMA)], capture_output=True, env=_env(), check=False)
    return time.perf_counter() - t


def first_byte(extra: list[str]) -> tuple[float, float]:
    """(seconds to the first byte on stdout, seconds to exit) for one `sgcli generate`."""
    cmd = [sys.executable, "-m", "sgcli", "generate", "--schema", str(SCHEMA), "-q", *extra]
    t = time.perf_counter()
    proc = subprocess.Popen(
        cmd + ["What is the capital of France?"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_env()
    )
    proc.stdout.read(1)
    first = time.perf_counter() - t
    proc.communicate()
    return first, time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    first_byte([])  # warm: conversion cache, OS file cache
    lint, ttft, total = [], [], []
    for _ in range(args.rounds):
        lint.append(lint_wall())
        f, t = first_byte([])
        ttft.append(f)
        total.append(t)
    print(f"sgcli lint {SCHEMA.name}: median {statistics.median(lint):.2f} s wall  {[round(x, 2) for x in lint]}")
    print(
        f"sgcli generate, process start to first byte: median {statistics.median(ttft):.2f} s  "
        f"{[round(x, 2) for x in ttft]}; whole run {statistics.median(total):.2f} s"
    )


if __name__ == "__main__":
    main()
