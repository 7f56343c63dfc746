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


def one_generation(tokenizer, lm, max_tokens: int) -> dict:
    from sgcli import backends
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import Done, Request, Session

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(FIXED_KEYS), "gpu_check")
    compiled, _ = backends.compile_for("xgrammar", spec, tokenizer.vocab.padded(lm.logits_width))
    session = Session(lm, tokenizer, compiled, SamplingParams(), max_tokens=max_tokens)
    record = next(e.record for e in session.stream(Request("gpu", "Describe France as JSON.")) if isinstance(e, Done))
    return record


# Bounds on |native - transformers| logits, as a fraction of the largest |logit|. float32: the two
# forwards compute the same products in another order (the CPU test suite holds them to 1e-4).
# bfloat16: each product rounds to 8 bits of mantissa (2^-8 = 0.4% per rounding), and a 30-layer
# model accumulates a few roundings: 5% leaves room for that and fails a wrong formula (such as a
# missing rotary sign or norm), which moves logits by their own size.
BOUNDS = {"float32": 1e-4, "bfloat16": 0.05, "float16": 0.05}


def check_native(bundle: Path, device: str, dtype: str, greedy_tokens: int = 32) -> dict:
    """Native forward vs transformers on `device`, same random weights: logits and greedy tokens."""
    import tempfile

    import torch

    from sgcli.engine import device_checks
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import ModelRef

    tokenizer, peer = load_bundle(bundle, device, dtype)
    with tempfile.TemporaryDirectory() as folder:
        peer.model.save_pretrained(folder)
        native = load_model(ModelRef("dir", folder, "native twin"), device=device, dtype=dtype, impl="native")
    ids = torch.tensor([tokenizer.encode("Describe France as JSON with its capital and population.")], device=device)
    with torch.no_grad():
        want = peer.model(ids).logits[0, -1].float()
        got = native.model(ids, use_cache=False).logits[0, -1].float()
        diff = float((want - got).abs().max() / want.abs().max().clamp_min(1e-6))
        same = 0
        a, b = ids, ids
        for _ in range(greedy_tokens):
            ta = peer.model(a).logits[0, -1].argmax()
            tb = native.model(b, use_cache=False).logits[0, -1].argmax()
            if ta != tb:
                break
            same += 1
            a = torch.cat([a, ta.view(1, 1)], dim=1)
            b = torch.cat([b, tb.view(1, 1)], dim=1)
    bound = BOUNDS.get(native.dtype, 0.05)
    result = {
        "passed": diff <= bound and same == greedy_tokens,
        "dtype": native.dtype,
        "max_logit_diff_fraction": round(diff, 6),
        "bound": bound,
        "greedy_tokens_equal": same,
        "greedy_tokens": greedy_tokens,
    }
    device_checks.record(native.device, result)
    result["batch"] = check_batch(tokenizer, native)  # reported beside the record, not part of its verdict
    return result


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bundle", type=Path, default=Path(".gpu"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=120)
    args = parser.parse_args()
    print("# native vs transformers:", json.dumps(check_native(args.bundle, args.device, args.dtype)), flush=True)
    tokenizer, lm = load_bundle(args.bundle, args.device, args.dtype)
    record = one_generation(tokenizer, lm, args.max_tokens)
    keep = ("output", "valid", "errors", "finish_reason", "usage", "timings")
    print(json.dumps({k: record[k] for k in keep}), flush=True)
    print(f"# {lm.ref.display} on {lm.device} {lm.dtype}, {args.rounds} rounds", flush=True)
    measure(tokenizer, lm, ["xgrammar", "llguidance", "outlines_core"], args.rounds, args.max_tokens)
    compare(tokenizer, lm, args.rounds, args.max_tokens)


if __name__ == "__main__":
    main()
