"""Warm load of the default GGUF model (conversion cached, page cache hot): `LoadedModel.load_s` and
the peak memory of a fresh process that loads it, and the size of each cached conversion folder.
With `--baseline DIR` (another sgcli checkout, e.g. main, which caches float32 weights) the trees
alternate round by round in one run, so a shared machine's load hits both alike.

    python benchmarks/gguf_load.py [--rounds 6] [--baseline /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, resource, time
t = time.perf_counter()
from sgcli.engine.loader import load_model
from sgcli.models.refs import resolve_model
loaded = load_model(resolve_model(None), device="cpu")
print(json.dumps({"load_s": loaded.load_s, "process_s": time.perf_counter() - t, "threads": loaded.threads,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(tree: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def folder_sizes() -> dict[str, float]:
    """MB of every cached conversion folder (model, recipe, tokenizer) under the cache root."""
    from sgcli.cache.paths import cache_root

    sizes = {}
    for folder in sorted((cache_root() / "models").glob("*/*")):
        if folder.is_dir() and not folder.name.startswith("."):
            sizes[f"{folder.parent.name[:24]}…/{folder.name}"] = (
                sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6
            )
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--baseline", type=Path)
    args = parser.parse_args()
    trees = {"this": ROOT} if args.baseline is None else {"baseline": args.baseline.resolve(), "this": ROOT}
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds")
    for tree in trees.values():
        run(tree)  # warm: conversion, bytecode, page cache
    runs: dict[str, list[dict]] = {label: [] for label in trees}
    for _ in range(args.rounds):
        for label, tree in trees.items():
            runs[label].append(run(tree))
    print(f"{'tree':<9} {'load med':>9} {'load min':>9} {'process med':>12} {'peak RSS MB':>12} threads")
    for label, values in runs.items():
        med = statistics.median
        print(
            f"{label:<9} {med(v['load_s'] for v in values):9.3f} {min(v['load_s'] for v in values):9.3f} "
            f"{med(v['process_s'] for v in values):12.3f} {med(v['rss_mb'] for v in values):12.0f} "
            f"{sorted({v['threads'] for v in values})}"
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    for name, mb in folder_sizes().items():
        print(f"  {name}: {mb:,.1f} MB")


if __name__ == "__main__":
    main()
