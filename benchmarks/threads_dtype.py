"""Per-token decode step of the default model: torch threads (torch's default / sgcli's default /
1 / 2) x dtype (float32 / bfloat16), interleaved rounds. Chose `--threads` and `--dtype auto` on CPU.
sgcli's default (`sgcli.engine.threads.default_cpu_threads`) is read once, before the models load,
with the machine's load at that moment: run it idle and busy to see both of its answers.

    python benchmarks/threads_dtype.py [--rounds 4] [--steps 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from common import ROOT  # noqa: F401  (puts the repo on sys.path)


def step_ms(lm, steps: int) -> float:
    import torch

    prompt = torch.tensor([list(range(100, 160))])
    with torch.inference_mode():
        _, past = lm.runtime.logits(prompt, lm.runtime.new_cache(), 1)
        token = torch.tensor([[200]])
        t = time.perf_counter()
        for _ in range(steps):
            _, past = lm.runtime.logits(token, past, 1)
        return (time.perf_counter() - t) / steps * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=12)
    args = parser.parse_args()
    import torch

    from sgcli.engine.loader import load_model
    from sgcli.engine.threads import default_cpu_threads
    from sgcli.models.refs import resolve_model

    default, auto = torch.get_num_threads(), default_cpu_threads()
    lms = {d: load_model(resolve_model(None), device="cpu", dtype=d) for d in ("float32", "bfloat16")}
    print(
        f"# torch default threads {default}, sgcli default {auto} (load {os.getloadavg()[0]:.2f}), "
        f"cores {os.cpu_count()}, {args.rounds} rounds x {args.steps} steps"
    )
    print("# " + ", ".join(f"{d}: {lm.impl} forward, kernel {lm.kernel or 'torch'}" for d, lm in lms.items()))
    results: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for label, n in (
            (f"torch default ({default})", default),
            (f"sgcli default ({auto})", auto),
            ("1", 1),
            ("2", 2),
        ):
            torch.set_num_threads(n)
            for dtype, lm in lms.items():
                results.setdefault((label, dtype), []).append(step_ms(lm, args.steps))
    print("| threads | dtype | ms per step (median) | rounds |")
    print("|---|---|---|---|")
    for (label, dtype), values in results.items():
        print(f"| {label} | {dtype} | {statistics.median(values):.1f} | {[round(v) for v in values]} |")


if __name__ == "__main__":
    main()
