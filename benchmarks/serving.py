"""Local in-process generation vs `--engine vllm` on the same batch: throughput, side by side.

Both sides run the same CLI command on the same JSONL batch and constraint; only `--engine`
differs. Rounds alternate (local, vllm, local, vllm...) so machine noise hits both. Throughput
is completion tokens (summed from the records) per wall-clock second of the whole command;
the local side includes loading the model (~1 s warm), the vLLM side a running server's work.

    scripts/serve-vllm.sh serve 8765 &          # once; wait for "Application startup complete"
    python benchmarks/serving.py --base-url http://127.0.0.1:8765 --requests 16 --concurrency 4
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ["Capital of France?", "Capital of Italy?", "Capital of Spain?", "Capital of Japan?"]


def run(cmd: list[str], out: Path) -> tuple[float, int, int]:
    """(seconds, completion tokens, valid records) for one CLI run."""
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    tokens = sum(r["usage"]["completion_tokens"] or 0 for r in records)
    return seconds, tokens, sum(bool(r["valid"]) for r in records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None, help="--threads for the local side")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="sgcli-serving-bench-"))
    batch = tmp / "in.jsonl"
    batch.write_text(
        "".join(json.dumps({"id": i, "prompt": PROMPTS[i % len(PROMPTS)]}) + "\n" for i in range(args.requests))
    )
    base = [sys.executable, "-m", "sgcli", "generate", "--quiet", "--regex", "[A-Z][a-z]{2,12}( [A-Z][a-z]{2,12})?"]
    base += ["-n", str(args.max_tokens), "--input", str(batch)]
    local = [*base, "--engine", "local"] + (["--threads", str(args.threads)] if args.threads else [])
    remote = [*base, "--engine", "vllm", "--base-url", args.base_url, "--concurrency", str(args.concurrency)]
    totals = {"local": [0.0, 0, 0], "vllm": [0.0, 0, 0]}
    for r in range(args.rounds):
        for name, cmd in (("local", local), ("vllm", remote)):
            out = tmp / f"{name}-{r}.jsonl"
            seconds, tokens, valid = run([*cmd, "--output", str(out)], out)
            print(f"round {r + 1} {name:5s}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s, "
                  f"{valid}/{args.requests} valid", flush=True)  # fmt: skip
            for i, v in enumerate((seconds, tokens, valid)):
                totals[name][i] += v
    tps = {name: t[1] / t[0] for name, t in totals.items()}
    print(f"\n{args.requests} requests x {args.rounds} rounds, regex-constrained, max {args.max_tokens} tokens")
    print(f"local: {tps['local']:.1f} tok/s   vllm (concurrency {args.concurrency}): {tps['vllm']:.1f} tok/s")
    print(f"ratio vllm / local: {tps['vllm'] / tps['local']:.2f}")


if __name__ == "__main__":
    main()
