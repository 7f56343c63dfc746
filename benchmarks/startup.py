"""Start-up as a user sees it: `sgcli --help`, `sgcli lint` on a small schema, `sgcli backends`, and
a warm `sgcli generate` from process start to its first output byte (model conversion and grammar
caches already warm). Every command runs in a fresh process; the commands' rounds alternate, and
with `--baseline DIR` (another sgcli checkout, e.g. the main branch) each round runs both trees
back to back, so before/after ratios come from one run on the same (possibly shared) machine.

    python benchmarks/startup.py [--rounds 5] [--generate] [--baseline /path/to/other/checkout]

A pip-installed sgcli has its modules byte-compiled, so by default each checkout's `sgcli/` is copied
to a temporary folder and byte-compiled there (the checkout is never written to); `--source` leaves
the copies without bytecode, so every run compiles sgcli's modules (what PYTHONDONTWRITEBYTECODE=1 on
an editable install costs). The libraries in site-packages keep their bytecode either way.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "examples" / "capital.json"
PROMPT = "What is the capital of France?"
COMMANDS = {
    "--help": ["--help"],
    "lint": ["lint", str(SCHEMA)],
    "backends": ["backends"],
}


def _snapshot(tree: Path, source: bool) -> Path:
    """A copy of `tree`'s sgcli package to run from, byte-compiled unless `source`: the checkout itself
    is never written to, and a stale __pycache__ in it cannot be used."""
    import compileall
    import shutil

    copy = Path(tempfile.mkdtemp(prefix="sgcli-startup-"))
    shutil.copytree(tree / "sgcli", copy / "sgcli", ignore=shutil.ignore_patterns("__pycache__"))
    if not source:
        compileall.compile_dir(str(copy / "sgcli"), quiet=1)
    return copy


def _env(copy: Path) -> dict:
    """The environment that runs the copy's sgcli (the runs also start in it: `python -m` puts the
    working directory first on sys.path). Nothing writes bytecode during the runs."""
    return {**os.environ, "PYTHONPATH": str(copy), "SGCLI_BENCH_TREE": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(args: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `sgcli ARGS` process."""
    t, cpu = time.perf_counter(), _child_cpu()
    subprocess.run(
        [sys.executable, "-m", "sgcli", *args], capture_output=True, env=env, cwd=env["SGCLI_BENCH_TREE"], check=False
    )
    return time.perf_counter() - t, _child_cpu() - cpu


def first_byte(env: dict) -> tuple[float, float, float]:
    """(seconds to the first byte on stdout, seconds to exit, CPU seconds in all) for one `sgcli generate`."""
    cmd = [sys.executable, "-m", "sgcli", "generate", "--schema", str(SCHEMA), "-q", PROMPT]
    t, cpu = time.perf_counter(), _child_cpu()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=env["SGCLI_BENCH_TREE"]
    )
    proc.stdout.read(1)
    first = time.perf_counter() - t
    proc.communicate()
    return first, time.perf_counter() - t, _child_cpu() - cpu


def _rounds(trees: dict[str, dict], rounds: int, generate: bool) -> dict[tuple[str, str], list[tuple]]:
    runs: dict[tuple[str, str], list[tuple]] = {}
    for _ in range(rounds):
        for name, args in COMMANDS.items():
            for label, env in trees.items():
                runs.setdefault((name, label), []).append(run_once(args, env))
        if generate:
            for label, env in trees.items():
                runs.setdefault(("generate", label), []).append(first_byte(env))
    return runs


def _report(runs: dict[tuple[str, str], list[tuple]], labels: list[str]) -> None:
    print(f"{'command':<10} {'tree':<9} {'wall med':>9} {'wall min':>9} {'CPU med':>8}  (seconds)")
    for (name, label), values in runs.items():
        wall = [v[0] for v in values]
        cpu = [v[-1] for v in values]
        extra = ""
        if name == "generate":
            extra = f"  first byte; exit med {statistics.median(v[1] for v in values):.2f}"
        med = statistics.median
        print(f"{name:<10} {label:<9} {med(wall):9.3f} {min(wall):9.3f} {med(cpu):8.3f}{extra}")
    if len(labels) == 2:
        print(f"\nratio {labels[1]} / {labels[0]} (median wall; median CPU):")
        for name in dict.fromkeys(n for n, _ in runs):
            a, b = runs[(name, labels[0])], runs[(name, labels[1])]
            walls = [statistics.median(v[0] for v in r) for r in (a, b)]
            cpus = [statistics.median(v[-1] for v in r) for r in (a, b)]
            print(f"  {name:<10} {walls[1] / walls[0]:.2f}x wall; {cpus[1] / cpus[0]:.2f}x CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--generate", action="store_true", help="also time a warm `sgcli generate` (slow)")
    parser.add_argument("--baseline", type=Path, help="another sgcli checkout to time side by side")
    parser.add_argument("--source", action="store_true", help="no bytecode: compile every module each run")
    args = parser.parse_args()
    trees = {"this": _env(_snapshot(ROOT, args.source))}
    if args.baseline:
        trees = {"baseline": _env(_snapshot(args.baseline.resolve(), args.source)), **trees}
    print(
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds; "
        f"{'source (no bytecode)' if args.source else 'byte-compiled'}"
    )
    for env in trees.values():  # warm: bytecode, OS file cache, conversion cache
        for cmd in COMMANDS.values():
            run_once(cmd, env)
        if args.generate:
            first_byte(env)
    _report(_rounds(trees, args.rounds, args.generate), list(trees))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
