"""The defaults under a competing CPU-bound process: what share of their idle throughput they keep.

Issue 31's goal: with one competing CPU-bound process on the machine, `sgcli generate --input` with
its default flags (threads and batch size chosen by sgcli) keeps >= 40% of its idle throughput:
torch threads must not spin against the other process. Rounds alternate idle and busy; "busy" is one
Python process spinning on a core (`while True: pass`) started before `generate` and stopped after.
Throughput is the batch's own tok/s from generate's summary line (after the model load), and the
whole command's (load included). Each run's threads and batch size are read from its summary.

`--hog-after S`: the competing process starts S seconds after `generate` instead of before it (work
that arrives mid-run, which the threads chosen at load cannot have seen: `threads.Governor` follows
it). `--tree PATH`: run the sgcli of another checkout (its root; an A/B against this one).

    python benchmarks/competing_load.py [--prompts 32] [--max-tokens 80] [--rounds 2] [--hog-after S]
                                        [--tree PATH] [-- MORE generate FLAGS]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from serving import parse_summary

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 40},
        "facts": {"type": "array", "items": {"type": "string", "maxLength": 40}, "minItems": 2, "maxItems": 2},
    },
    "required": ["city", "facts"],
    "additionalProperties": False,
}
CITIES = "Paris Berlin Madrid Rome Lisbon Vienna Prague Warsaw Oslo Stockholm Helsinki Dublin Athens Sofia Riga Tallinn"


def _prompts(n: int) -> list[dict]:
    cities = CITIES.split()
    return [{"id": f"p{i}", "prompt": f"Two facts about {cities[i % len(cities)]}, as JSON."} for i in range(n)]


def _hog() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def _run(
    folder: Path, max_tokens: int, extra: list[str], busy: bool, hog_after: float | None = None, tree: Path = ROOT
) -> dict:
    hog = _hog() if busy and hog_after is None else None
    try:
        time.sleep(0.5 if hog else 0)  # the hog is running (and counted in the load) before sgcli starts
        out = folder / f"out-{time.monotonic_ns()}.jsonl"
        cmd = [sys.executable, "-m", "sgcli", "generate", "--schema", str(folder / "s.json")]
        cmd += ["--input", str(folder / "prompts.jsonl"), "-o", str(out), "--max-tokens", str(max_tokens), *extra]
        env = os.environ | {"NO_COLOR": "1", "COLUMNS": "200"}
        load = os.getloadavg()[0]
        t = time.perf_counter()
        run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tree)
        if busy and hog_after is not None:
            try:
                run.wait(timeout=hog_after)
            except subprocess.TimeoutExpired:
                hog = _hog()  # arrives mid-run
        _, stderr = run.communicate()
        done = subprocess.CompletedProcess(cmd, run.returncode, "", stderr)
        wall = time.perf_counter() - t
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    summary = parse_summary(done.stderr)
    if done.returncode not in (0, 1) or summary is None:
        raise SystemExit(f"generate failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    records, tokens, seconds = summary
    how = next((line for line in done.stderr.splitlines() if "thread" in line and "records" in line), "")
    return {
        "busy": busy,
        "records": records,
        "tokens": tokens,
        "batch_s": seconds,
        "batch_tok_s": round(tokens / seconds, 1) if seconds else None,
        "wall_s": round(wall, 2),
        "wall_tok_s": round(tokens / wall, 1),
        "load_before": round(load, 2),
        "how": how.strip()[-160:],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=80)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--hog-after", type=float, help="start the competing process this many seconds into the run")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose sgcli runs (default: this one)")
    parser.add_argument("extra", nargs="*", help="more generate flags, after --")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sgcli-competing-") as tmp:
        folder = Path(tmp)
        (folder / "s.json").write_text(json.dumps(SCHEMA))
        (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in _prompts(args.prompts)))
        _run(folder, 4, args.extra, busy=False, tree=args.tree)  # warm-up: conversions and caches, not measured
        runs = []
        for r in range(args.rounds):
            for busy in (False, True) if r % 2 == 0 else (True, False):
                runs.append(_run(folder, args.max_tokens, args.extra, busy, args.hog_after, args.tree))
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    idle = statistics.median(r["batch_tok_s"] for r in runs if not r["busy"])
    busy = statistics.median(r["batch_tok_s"] for r in runs if r["busy"])
    idle_wall = statistics.median(r["wall_tok_s"] for r in runs if not r["busy"])
    busy_wall = statistics.median(r["wall_tok_s"] for r in runs if r["busy"])
    report = {
        "cpus": os.cpu_count(),
        "batch_tok_s": {"idle": idle, "busy": busy, "kept": round(busy / idle, 3)},
        "wall_tok_s": {"idle": idle_wall, "busy": busy_wall, "kept": round(busy_wall / idle_wall, 3)},
        "runs": runs,
    }
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(f"batch tok/s: idle {idle}, with one competing process {busy}: kept {busy / idle:.0%}")
        print(f"whole command tok/s: idle {idle_wall}, busy {busy_wall}: kept {busy_wall / idle_wall:.0%}")
    return 0 if busy / idle >= 0.4 else 1


if __name__ == "__main__":
    sys.exit(main())
