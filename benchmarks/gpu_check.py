"""The GPU half of benchmarks/gpu_check.sh: sgcli's native forward checked against transformers on the
device (logits and greedy outputs; a pass is recorded, and `--model-impl auto` trusts the native
forward there from then on: sgcli/engine/device_checks.py) and its batch paths (joint, ragged passes:
batched rows against lone ones, reported beside the record), a constrained generation on CUDA in
bf16, then the rows.

The model is the default model's architecture (`.gpu/config.json`) with random weights (see
gpu_check.sh for why); the tokenizer is the default model's. Also runs on CPU (`--device cpu`)
so the script itself is checked where no GPU is.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import ROOT  # noqa: F401  (puts the repo on sys.path)
from jump_forward import FIXED_KEYS, measure
from jump_forward_peer import compare


def load_bundle(bundle: Path, device: str, dtype: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from sgcli.engine.loader import LoadedModel, pick_dtype
    from sgcli.engine.runtime import TransformersRuntime
    from sgcli.models.refs import ModelRef
    from sgcli.tokenizers import load_tokenizer

    t = time.perf_counter()
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(bundle / "config.json")
    torch_dtype = pick_dtype(dtype, device)
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype).to(device).eval()
    runtime = TransformersRuntime(model)
    ref = ModelRef("dir", str(bundle), "SmolLM2-135M architecture, random weights")
    name = str(torch_dtype).removeprefix("torch.")
    width, elapsed = runtime.logits_width(), time.perf_counter() - t
    lm = LoadedModel(runtime, ref, device, name, width, elapsed, torch.get_num_threads())
    return load_tokenizer(str(bundle / "tokenizer")), lm


def generate_compiled(tokenizer, lm):
    """FIXED_KEYS compiled (xgrammar) in the layout `generate` compiles by default (compact)."""
    from sgcli import backends
    from sgcli.constraints.spec import GENERATE_WHITESPACE, ConstraintSpec, JsonOptions, Kind

    layout = JsonOptions(whitespace=GENERATE_WHITESPACE, for_generation=True)
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(FIXED_KEYS), "gpu_check", json_options=layout)
    return backends.compile_for("xgrammar", spec, tokenizer.vocab.padded(lm.logits_width))[0]


def _timed_ms(fn, device: str, rounds: int) -> list[float]:
    """Wall ms of `rounds` calls of `fn` after one warm-up call (kernels chosen, memory allocated), the
    device's queued work waited for around each, so the clock times it (nothing to wait for on a CPU)."""
    import torch

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    fn()
    times = []
    for _ in range(rounds):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t) * 1000)
    return times


def one_generation(tokenizer, lm, max_tokens: int) -> dict:
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import Done, Request, Session

    compiled = generate_compiled(tokenizer, lm)
    session = Session(lm, tokenizer, compiled, SamplingParams(), max_tokens=max_tokens)
    record = next(e.record for e in session.stream(Request("gpu", "Describe France as JSON.")) if isinstance(e, Done))
    return record


# Bounds on |native - transformers| logits, as a fraction of the largest |logit|. float32: the two
# forwards compute the same products in another order (the CPU test suite holds them to 1e-4).
# bfloat16: each product rounds to 8 bits of mantissa (2^-8 = 0.4% per rounding), and a 30-layer
# model accumulates a few roundings: 5% leaves room for that and fails a wrong formula (such as a
# missing rotary sign or norm), which moves logits by their own size.
BOUNDS = {"float32": 1e-4, "bfloat16": 0.05, "float16": 0.05}


def check_native(bundle: Path, device: str, dtype: str, folder: Path, greedy_tokens: int = 32) -> dict:
    """Native forward vs transformers on `device`, same random weights (saved to `folder`, which the
    caller keeps): logits and greedy tokens, then the batch paths."""
    import torch

    from sgcli.engine.loader import load_model
    from sgcli.models.refs import ModelRef

    tokenizer, peer = load_bundle(bundle, device, dtype)
    peer.model.save_pretrained(folder)
    native = load_model(ModelRef("dir", str(folder), "native twin"), device=device, dtype=dtype, impl="native")
    ids = torch.tensor([tokenizer.encode("Describe France as JSON with its capital and population.")], device=device)
    # Teacher-forced: both forwards read the same tokens (transformers' greedy choices), so one early
    # difference cannot hide the rest. float32 must choose the same token at every step; bfloat16 may
    # choose another only at a near-tie, where transformers' own top two logits lie within the bound
    # (measured on an H200: each side's SDPA kernel rounds its own way and parted 5 of 32 steps in).
    bound = BOUNDS.get(native.dtype, 0.05)
    worst, differ, ties_only, seq = 0.0, 0, True, ids
    with torch.no_grad():
        for _ in range(greedy_tokens):
            want = peer.model(seq).logits[0, -1].float()
            got = native.model(seq, use_cache=False).logits[0, -1].float()
            scale = want.abs().max().clamp_min(1e-6)
            worst = max(worst, float((want - got).abs().max() / scale))
            ta, tb = int(want.argmax()), int(got.argmax())
            if ta != tb:
                differ += 1
                ties_only &= float((want[ta] - want[tb]) / scale) <= bound
            seq = torch.cat([seq, torch.tensor([[ta]], device=seq.device)], dim=1)
    exact = native.dtype == "float32"
    result = {
        "passed": worst <= bound and (differ == 0 if exact else ties_only),
        "dtype": native.dtype,
        "max_logit_diff_fraction": round(worst, 6),
        "bound": bound,
        "argmax_steps": greedy_tokens,
        "argmax_differ": differ,
        "differ_only_at_ties": ties_only,
    }
    result["batch"] = check_batch(tokenizer, native)  # reported beside the verdict, not part of it
    result["timings"] = forward_times(tokenizer, native, peer)
    return result


def forward_times(tokenizer, native, peer, rows: int = 16, prompt: int = 512, rounds: int = 10) -> dict:
    """Median ms of one forward pass, native against transformers on the same weights: a `prompt`-token
    prefill, and a `rows`-row decode step over a cache of `prompt` tokens (where the attention kernel
    SDPA picks for the native forward's explicit mask shows)."""
    import statistics

    import torch

    def timed(fn) -> float:
        return round(statistics.median(_timed_ms(fn, native.device, rounds)), 3)

    base = tokenizer.encode("Describe France as JSON with its capital and population. " * 64)[:prompt]
    one = torch.tensor([base], device=native.device)
    many = torch.tensor([base] * rows, device=native.device)
    out = {}
    with torch.no_grad():
        for name, lm in (("native", native), ("transformers", peer)):
            out[f"{name}_prefill_{prompt}_ms"] = timed(lambda lm=lm: lm.runtime.logits(one, lm.runtime.new_cache(), 1))
            _, cache = lm.runtime.logits(many, lm.runtime.new_cache(), 1)
            # each timed step appends one token: the cache grows from `prompt` to `prompt` + rounds + 1
            out[f"{name}_step_{rows}x{prompt}_ms"] = timed(lambda lm=lm, c=cache: lm.runtime.logits(many[:, -1:], c, 1))
    return out


def check_batch(tokenizer, lm, chunk: int = 5) -> dict:
    """The native forward's batch paths on the device: 6 prompts of different lengths decoded 3 rows
    at a time, the joining rows prefilled `chunk` tokens a step beside the running rows (joint,
    ragged passes), against each prompt decoded alone. Greedy rows must be equal in float32; in
    bfloat16 they may part at logit ties, so the count is what is reported."""
    from sgcli import backends
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine import batching
    from sgcli.engine.decode import decode
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.sequence import Finished

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(FIXED_KEYS), "gpu_check")
    compiled, _ = backends.compile_for("xgrammar", spec, tokenizer.vocab.padded(lm.logits_width))
    words = "Describe France as JSON with its capital and population, please, in one object".split()
    prompts = [tokenizer.encode(" ".join(words[: 2 + 2 * i])) for i in range(6)]
    params, chosen = SamplingParams(temperature=0.0), batching.PREFILL_CHUNK
    batching.PREFILL_CHUNK = chunk
    stats = batching.BatchStats()
    try:
        got = dict(
            batching.decode_batch(lm, prompts, compiled, params=params, max_tokens=40, batch_size=3, stats=stats)
        )
    finally:
        batching.PREFILL_CHUNK = chosen
    equal = 0
    for i, ids in enumerate(prompts):
        (alone,) = [e for e in decode(lm, ids, compiled, params=params, max_tokens=40) if isinstance(e, Finished)]
        equal += got[i].token_ids == alone.token_ids
    return {"rows_equal": equal, "rows": len(prompts), "joint_steps": stats.joint_steps, "dtype": lm.dtype}


def batch_rates(tokenizer, lm, rows: int = 16, max_tokens: int = 64, sequential: bool = True) -> dict:
    """Aggregate tok/s of `rows` distinct prompts decoded as one batch (greedy, compact JSON, xgrammar),
    against the same prompts one at a time."""
    from sgcli.engine import batching
    from sgcli.engine.decode import decode
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.sequence import Finished

    compiled = generate_compiled(tokenizer, lm)
    countries = "France Spain Italy Japan Peru Chile Kenya Egypt Norway Chad Mali Laos Iran Cuba Fiji Oman".split()
    prompts = [tokenizer.encode(f"Describe {c} as JSON.") for c in countries[:rows]]
    params = SamplingParams(temperature=0.0)
    out = {}
    for label, size in (("batch", rows), ("sequential", 1))[: 2 if sequential else 1]:
        t = time.perf_counter()
        tokens = 0
        if size == 1:
            for ids in prompts:
                events = decode(lm, ids, compiled, params=params, max_tokens=max_tokens, repetition_guard=False)
                tokens += sum(len(e.token_ids) for e in events if isinstance(e, Finished))
        else:
            for _, fin in batching.decode_batch(
                lm, prompts, compiled, params=params, max_tokens=max_tokens, batch_size=size, repetition_guard=False
            ):
                tokens += len(fin.token_ids)
        out[f"{label}_tok_s"] = round(tokens / (time.perf_counter() - t), 1)
    if sequential:
        out["batch_vs_sequential"] = round(out["batch_tok_s"] / out["sequential_tok_s"], 2)
    return out


def step_profile(tokenizer, lm, steps: int = 20) -> dict:
    """Where a single-row decode step's time goes on the device: the forward alone (median ms a step,
    each step synchronised), the whole decode loop of `decode` (constrained, greedy) per token, and
    torch's profiler over a few forward steps (top ops by CPU time, then by device time)."""
    import statistics

    import torch
    from common import timed_decode
    from torch.profiler import ProfilerActivity, profile

    ids = torch.tensor([tokenizer.encode("Describe France as JSON with its capital and population.")], device=lm.device)
    with torch.no_grad():
        _, cache = lm.runtime.logits(ids, lm.runtime.new_cache(), 1)
        step = ids[:, -1:]
        times = _timed_ms(lambda: lm.runtime.logits(step, cache, 1), lm.device, steps)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if lm.device.startswith("cuda") else [])
        with profile(activities=activities) as prof:
            _timed_ms(lambda: lm.runtime.logits(step, cache, 1), lm.device, 4)  # five steps, the last waited for
    compiled = generate_compiled(tokenizer, lm)
    timed_decode(lm, compiled, ids[0].tolist(), max_tokens=16)  # warm
    done, clock = timed_decode(lm, compiled, ids[0].tolist(), max_tokens=64)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12), flush=True)
    if lm.device.startswith("cuda"):
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8), flush=True)
    return {
        "impl": lm.impl,
        "forward_step_ms_median": round(statistics.median(times), 3),
        "forward_step_ms_min": round(min(times), 3),
        "decode_loop_ms_per_pass": round(clock.wall * 1000 / max(done.forward_passes, 1), 3),
        "decode_tokens": done.completion_tokens,
        "decode_passes": done.forward_passes,
    }


def batch_profile(tokenizer, lm) -> None:
    """torch's profiler over one batch of `batch_rates` (where a batch step's time goes outside the model)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if lm.device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        batch_rates(tokenizer, lm, sequential=False)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15), flush=True)


def main() -> None:
    import tempfile

    from sgcli.engine import device_checks
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import ModelRef
    from sgcli.tokenizers import load_tokenizer

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bundle", type=Path, default=Path(".gpu"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=120)
    parser.add_argument("--quick", action="store_true", help="the checks, speeds and a batch profile only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        checks = {}
        for dtype in dict.fromkeys(("float32", args.dtype)):
            checks[dtype] = check_native(args.bundle, args.device, dtype, Path(root) / dtype)
            print(f"# native vs transformers, {dtype}:", json.dumps(checks[dtype]), flush=True)
        tokenizer = load_tokenizer(str(args.bundle / "tokenizer"))
        ref = ModelRef("dir", str(Path(root) / args.dtype), "SmolLM2-135M architecture, random weights")
        native = load_model(ref, device=args.device, dtype=args.dtype, impl="native")
        _, peer = load_bundle(args.bundle, args.device, args.dtype)
        rates = {name: batch_rates(tokenizer, model) for name, model in (("native", native), ("transformers", peer))}
        print("# batch 16 and one at a time:", json.dumps(rates), flush=True)
        faster = all(rates["native"][k] >= rates["transformers"][k] for k in ("batch_tok_s", "sequential_tok_s"))
        speed = ", ".join(
            f"{k.removesuffix('_tok_s')}: native {rates['native'][k]} vs transformers {rates['transformers'][k]} tok/s"
            for k in ("sequential_tok_s", "batch_tok_s")
        )
        verdict = {"passed": all(c["passed"] for c in checks.values()), "faster": faster, "speed": speed, **checks}
        print("# recorded:", device_checks.record(args.device, verdict), verdict["passed"], faster, flush=True)
        # what `--model-impl auto` now runs on this device, end to end
        lm = load_model(ref, device=args.device, dtype=args.dtype, impl="auto")
        print(f"# auto chose {lm.impl} ({lm.impl_reason or 'checked here'}) on {lm.device} {lm.dtype}", flush=True)
        for model in (native, peer):
            print("# one decode step:", json.dumps(step_profile(tokenizer, model)), flush=True)
        print("# a native batch of 16, profiled", flush=True)
        batch_profile(tokenizer, native)
        if args.quick:
            return
        record = one_generation(tokenizer, lm, args.max_tokens)
        keep = ("output", "valid", "errors", "finish_reason", "usage", "timings")
        print(json.dumps({k: record[k] for k in keep}), flush=True)
        print(f"# jump-forward rows, {native.impl} runtime, {args.rounds} rounds", flush=True)
        measure(tokenizer, native, ["xgrammar", "llguidance", "outlines_core"], args.rounds, args.max_tokens)
        print("# against transformers generate + xgrammar's LogitsProcessor (native: sgcli's forward)", flush=True)
        compare(tokenizer, peer, args.rounds, args.max_tokens, native=native)


if __name__ == "__main__":
    main()
