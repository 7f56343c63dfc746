"""Where a batch step's time goes, at 1, 4 and 16 rows: the model's forward against everything else.

`decode_batch` runs `batch_throughput.py`'s distinct-prompt workload on the default model; the
functions each step calls are wrapped with wall-clock timers (the wrappers cost ~1 us a call,
counted in "other"), so the shares are of one real run, not of a profiler's slowed-down one:

- forward: `KVBatch.forward` (the model's pass over every row, its KV cache included), the joint
  passes of the batch and its joining rows (`feed`, `hidden_parts`, `took`) and prefills (`prefill`,
  `PrefixStore.prepare`);
- head: the output projection of rows with a wide mask (`OutputHead.logits`, `row_logits`);
- mask fill: the grammar's bitmask for each row (`SequenceState.allowed`);
- choose: masking the logits and sampling (`SequenceState.choose`);
- take: the matcher's accept, detokenizing, stop checks, the repetition guard (`SequenceState.take`);
- cache bookkeeping: `KVBatch.join`, `keep`, `compact`;
- other: the loop itself, drafts, Python between the calls (the step's wall less the above).

    python benchmarks/step_profile.py [--sizes 1,4,16] [--requests 16] [--max-tokens 48] [--threads 2] [--peak]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

PARTS = ("forward", "head", "mask fill", "choose", "take", "cache bookkeeping")


def instrument(spent: dict[str, float]) -> list[tuple[object, str, object]]:
    """Wrap the step's functions so each adds its wall time to `spent[part]`; returns what to restore.
    Nested calls (an accept inside a forced run) count once: the outermost timed part holds the clock."""
    from sgcli.engine import batching, head, prefix, runtime, sequence

    depth = [0]

    def timed(part: str, fn):
        def wrapper(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            depth[0] += 1
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[part] += time.perf_counter() - t
                depth[0] -= 1

        return wrapper

    targets = [
        (batching.KVBatch, "forward", "forward"),
        (batching.KVBatch, "feed", "forward"),  # a joint pass: the batch's step beside joining rows' prompts
        (runtime.NativeRuntime, "hidden_parts", "forward"),
        (batching.KVBatch, "took", "forward"),
        (batching, "prefill", "forward"),
        (prefix.PrefixStore, "prepare", "forward"),  # the prompts' shared heads, prefilled side by side
        (head.OutputHead, "logits", "head"),
        (batching, "row_logits", "head"),
        (sequence.SequenceState, "allowed", "mask fill"),
        (sequence.SequenceState, "choose", "choose"),
        (sequence.SequenceState, "take", "take"),
        (batching.KVBatch, "join", "cache bookkeeping"),
        (batching.KVBatch, "keep", "cache bookkeeping"),
        (batching.KVBatch, "compact", "cache bookkeeping"),
    ]
    saved = []
    for owner, name, part in targets:
        original = getattr(owner, name)
        saved.append((owner, name, original))
        setattr(owner, name, timed(part, original))
    return saved


def restore(saved) -> None:
    for owner, name, original in saved:
        setattr(owner, name, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,4,16")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--peak", action="store_true", help="also measure the matrix-product peak and the share a 16-row step reaches"
    )
    args = parser.parse_args()

    from batch_throughput import SCHEMA, batched, workload

    from sgcli import backends
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
    from sgcli.engine.loader import load_model
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Session
    from sgcli.models.refs import resolve_model
    from sgcli.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(None)
    lm = load_model(resolve_model(None), device="cpu", dtype=args.dtype, threads=args.threads)
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(SCHEMA), "bench", json_options=JsonOptions("compact"))
    compiled, _ = backends.compile_for(args.backend, spec, tokenizer.vocab.padded(lm.logits_width))
    session = Session(lm, tokenizer, compiled, SamplingParams(temperature=0.0), args.max_tokens, (), PromptOptions())
    prompts = [session.render(r)[1] for r in workload(args.requests, False)]
    load = os.getloadavg()[0]
    print(
        f"{lm.ref.display} {lm.dtype}, kernel {lm.kernel or 'torch'}, {lm.threads} threads, backend "
        f"{compiled.backend}; {args.requests} distinct prompts x <= {args.max_tokens} tokens; load {load:.2f}"
    )
    batched(session, prompts[:2], 2)  # warm: oneDNN's first calls, the matcher's caches
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        spent: dict[str, float] = defaultdict(float)
        saved = instrument(spent)
        try:
            t = time.perf_counter()
            finished = batched(session, prompts, size)
            wall = time.perf_counter() - t
        finally:
            restore(saved)
        tokens = sum(f.completion_tokens for f in finished)
        shares = {part: spent[part] for part in PARTS}
        shares["other"] = max(0.0, wall - sum(shares.values()))
        rows.append({"rows": size, "wall_s": wall, "tokens": tokens, "tok_s": tokens / wall, "seconds": shares})
        parts = ", ".join(f"{part} {100 * s / wall:.1f}%" for part, s in shares.items())
        print(f"batch {size:2d}: {tokens} tokens in {wall:.2f} s = {tokens / wall:.1f} tok/s; {parts}")
    peak = matmul_peak(lm) if args.peak else None
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"load_before": load, "runs": rows, "peak": peak}, indent=1))


def matmul_peak(lm, rows: int = 16, columns: int = 100, steps: int = 20) -> dict:
    """The machine's matrix-product peak in the model's dtype (one wide product, [1024, hidden] x
    [hidden, 4 x hidden], as a prefill's MLP runs it; the faster of torch's `F.linear` and oneDNN's
    packed kernel, which differ by 2.3x in float32 on a Zen 5) against what a decode step of `rows` rows over
    `columns` cache columns reaches: the model's matrix-product FLOPs per token (2 x its weights less
    the embedding lookup's) x rows / the step's wall time."""
    import torch
    import torch.nn.functional as F

    from sgcli.engine import cpu_kernels

    body = lm.model.model
    hidden = body.embed.weight.shape[1]
    weights = sum(p.numel() for n, p in lm.model.named_parameters() if "norm" not in n) - body.embed.weight.numel()
    if lm.model.lm_head.weight is body.embed.weight:  # tied: the head's product still runs once a token
        weights += body.embed.weight.numel()
    dtype = lm.model.dtype
    a, b = torch.randn(1024, hidden, dtype=dtype), torch.randn(4 * hidden, hidden, dtype=dtype)
    products = [lambda: F.linear(a, b)]
    if cpu_kernels.onednn_problem() is None and (dtype == torch.float32 or cpu_kernels.bf16_kernel_problem() is None):
        packed = torch.ops.mkldnn._reorder_linear_weight(b, 4)
        products.append(lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [None], ""))
    with torch.inference_mode():
        best = float("inf")
        for product in products:
            for _ in range(3):
                product()
            t = time.perf_counter()
            for _ in range(steps):
                product()
            best = min(best, (time.perf_counter() - t) / steps)
        peak = 2 * a.shape[0] * b.shape[0] * hidden / best
        runtime = lm.runtime
        ids = torch.randint(0, lm.logits_width // 2, (rows, columns))
        mask = torch.ones(rows, columns, dtype=torch.long)
        _, cache = runtime.hidden(ids, runtime.new_cache(), attention_mask=mask)
        t = time.perf_counter()
        for i in range(steps):
            mask = torch.cat([mask, torch.ones(rows, 1, dtype=mask.dtype)], 1)
            position = torch.full((rows, 1), columns + i)
            hidden_states, cache = runtime.hidden(ids[:, :1], cache, attention_mask=mask, position_ids=position)
            runtime.head().logits(hidden_states[:, -1])
        step = (time.perf_counter() - t) / steps
    reached = 2 * weights * rows / step
    print(
        f"matrix-product peak ({dtype}, one [1024, {hidden}] x [{hidden}, {4 * hidden}] product): "
        f"{peak / 1e9:.0f} GFLOP/s; a decode step of {rows} rows over {columns} columns: {step * 1000:.1f} ms, "
        f"{reached / 1e9:.0f} GFLOP/s = {100 * reached / peak:.0f}% of it"
    )
    return {"peak_gflops": peak / 1e9, "step_ms": step * 1000, "step_gflops": reached / 1e9, "rows": rows}


if __name__ == "__main__":
    main()
