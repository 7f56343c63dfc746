"""The GPU half of benchmarks/gpu_check.sh: a constrained generation on CUDA in bf16, then the rows.

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
    from sgcli.models.refs import ModelRef
    from sgcli.tokenizers import load_tokenizer

    t = time.perf_counter()
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(bundle / "config.json")
    torch_dtype = pick_dtype(dtype, device)
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype).to(device).eval()
    width = model.get_output_embeddings().weight.shape[0]
    ref = ModelRef("dir", str(bundle), "SmolLM2-135M architecture, random weights")
    name = str(torch_dtype).removeprefix("torch.")
    lm = LoadedModel(model, ref, device, name, width, time.perf_counter() - t, torch.get_num_threads())
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bundle", type=Path, default=Path(".gpu"))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=120)
    args = parser.parse_args()
    tokenizer, lm = load_bundle(args.bundle, args.device, args.dtype)
    record = one_generation(tokenizer, lm, args.max_tokens)
    keep = ("output", "valid", "errors", "finish_reason", "usage", "timings")
    print(json.dumps({k: record[k] for k in keep}), flush=True)
    print(f"# {lm.ref.display} on {lm.device} {lm.dtype}, {args.rounds} rounds", flush=True)
    measure(tokenizer, lm, ["xgrammar", "llguidance", "outlines_core"], args.rounds, args.max_tokens)
    compare(tokenizer, lm, args.rounds, args.max_tokens)


if __name__ == "__main__":
    main()
