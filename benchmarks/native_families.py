"""sgcli's native forward against transformers, family by family, on random weights of the real shapes.

Each family is a checkpoint built from transformers' own config class at a real model's widths,
heads and vocabulary (SmolLM2-135M with Llama 3's rope scaling, Qwen2.5-0.5B, Qwen3-0.6B, Gemma 3
1B, Gemma 2 2B, and Mistral's architecture at SmolLM2-360M's widths: there is no Mistral that
small), with random weights and, where the machine's memory or time asks for it, fewer layers (the
table says how many). For each family and dtype it times one greedy decode of `--tokens` tokens
after a `--prompt`-token prompt, three ways, best CPU time of `--rounds` interleaved rounds:

  native        sgcli's forward through its runtime: a prefill, then one cached pass a token, the
                logits of the last position from its output head, each row's greedy token as
                the decode loop picks it (its forward work, without a grammar)
  tf-runtime    the same loop on transformers' model (what `--model-impl transformers` runs)
  tf-generate   transformers' own `generate` (greedy, exactly `--tokens` new tokens)

and `--batch` rows at once the same ways (prompts of one length, so nothing is padded). In
float32 the native and transformers tokens must agree (the same logits); the table says so.
CPU time (one torch thread by default) is the steady measure on a shared machine; wall time and
the load average are printed beside it.

    python benchmarks/native_families.py [--families llama,qwen2] [--dtypes float32,bfloat16]
        [--tokens 32] [--prompt 64] [--batch 16 | 0] [--batch-only] [--rounds 3] [--threads 1] [--json out.jsonl]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time

from common import ROOT, Clock  # noqa: F401  (ROOT puts the repo on sys.path)

# (config class, the real model whose shape it takes, its keyword arguments, layers kept of the real count)
FAMILIES = {
    "llama": (
        "LlamaConfig",
        "SmolLM2-135M, Llama 3 rope scaling",
        dict(
            vocab_size=49152,
            hidden_size=576,
            intermediate_size=1536,
            num_attention_heads=9,
            num_key_value_heads=3,
            tie_word_embeddings=True,
            max_position_embeddings=8192,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        ),
        (30, 30),
    ),
    "mistral": (
        "MistralConfig",
        "Mistral's architecture (sliding window 4096) at SmolLM2-360M's widths",
        dict(
            vocab_size=32768,
            hidden_size=960,
            intermediate_size=2560,
            num_attention_heads=15,
            num_key_value_heads=5,
            head_dim=64,
            sliding_window=4096,
        ),
        (32, 32),
    ),
    "qwen2": (
        "Qwen2Config",
        "Qwen2.5-0.5B",
        dict(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_attention_heads=14,
            num_key_value_heads=2,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
        (24, 24),
    ),
    "qwen3": (
        "Qwen3Config",
        "Qwen3-0.6B",
        dict(
            vocab_size=151936,
            hidden_size=1024,
            intermediate_size=3072,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
        (28, 28),
    ),
    "gemma3": (
        "Gemma3TextConfig",
        "Gemma 3 1B (sliding window 512, 5 sliding layers to 1 global)",
        dict(
            vocab_size=262144,
            hidden_size=1152,
            intermediate_size=6912,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            query_pre_attn_scalar=256,
            sliding_window=512,
        ),
        (6, 26),
    ),
    "gemma2": (
        "Gemma2Config",
        "Gemma 2 2B (alternating sliding and global layers, soft-capping)",
        dict(
            vocab_size=256000,
            hidden_size=2304,
            intermediate_size=9216,
            num_attention_heads=8,
            num_key_value_heads=4,
            head_dim=256,
        ),
        (2, 26),
    ),
}


def build(family: str, folder: str):
    """The family's random checkpoint, saved in `folder`; returns (its parameters, layers kept, of)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    name, _, kwargs, (layers, real) = FAMILIES[family]
    config = getattr(transformers, name)(**kwargs, num_hidden_layers=layers)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder)
    count = sum(p.numel() for p in model.parameters())
    del model
    return count, layers, real


def native_loop(runtime, ids, tokens: int) -> list[list[int]]:
    """Greedy decoding through a runtime: the decode loop's forward work, without a grammar, each
    row's token chosen as the decode loop chooses it (`sampling.sample`: numpy's argmax of the row on
    a CPU: for 16 of Gemma's 256k-wide rows 0.65 ms row by row, where torch's over all at once took 5.9)."""
    import torch

    from sgcli.engine.sampling import SamplingParams, sample

    greedy = SamplingParams(temperature=0.0)
    head = runtime.head()
    out = []
    with torch.inference_mode():
        hidden, cache = runtime.hidden(ids, runtime.new_cache())
        for _ in range(tokens):
            logits = head.logits(hidden[:, -1])
            token = torch.tensor([[sample(row, greedy, None)] for row in logits])
            out.append(token[:, 0].tolist())
            if len(out) == tokens:
                break
            hidden, cache = runtime.hidden(token, cache)
    return [list(row) for row in zip(*out)]


def generate(model, ids, tokens: int) -> list[list[int]]:
    import torch

    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=False,
            pad_token_id=0,
        )
    return out[:, ids.shape[1] :].tolist()


def measure(family: str, dtype: str, args, folder: str) -> dict:
    import torch

    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model

    ref = resolve_model(folder)
    native = load_model(ref, device="cpu", dtype=dtype, impl="native", threads=args.threads)
    theirs = load_model(ref, device="cpu", dtype=dtype, impl="transformers", threads=args.threads)
    torch.manual_seed(1)
    vocab = native.logits_width
    runs = {"native": (native_loop, native.runtime), "tf-runtime": (native_loop, theirs.runtime)}
    runs["tf-generate"] = (lambda model, ids, n: generate(model, ids, n), theirs.model)
    result = {"family": family, "dtype": dtype, "kernel": native.kernel}
    for rows in _rows(args):
        ids = torch.randint(3, vocab, (rows, args.prompt))
        best: dict[str, tuple[float, float]] = {}
        tokens: dict[str, list] = {}
        for fn, target in runs.values():  # first calls (oneDNN's, allocators) are not what is measured
            fn(target, ids, 2)
        for _ in range(args.rounds):
            for label, (fn, target) in runs.items():
                with Clock() as clock:
                    tokens[label] = fn(target, ids, args.tokens)
                cpu, wall = best.get(label, (float("inf"), float("inf")))
                best[label] = (min(cpu, clock.cpu), min(wall, clock.wall))
        key = "single" if rows == 1 else f"batch{rows}"
        result[key] = {
            label: {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "tok_s": round(rows * args.tokens / cpu, 1)}
            for label, (cpu, wall) in best.items()
        }
        result[key]["same_tokens"] = tokens["native"] == tokens["tf-generate"] == tokens["tf-runtime"]
        result[key]["speedup_vs_generate"] = round(best["tf-generate"][0] / best["native"][0], 2)
        result[key]["speedup_vs_runtime"] = round(best["tf-runtime"][0] / best["native"][0], 2)
    del native, theirs
    gc.collect()
    return result


def _rows(args) -> list[int]:
    """The row counts to time: one (unless --batch-only) and --batch (unless 0)."""
    return ([] if args.batch_only else [1]) + ([args.batch] if args.batch else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16, help="rows of the batched runs; 0: single stream only")
    parser.add_argument("--batch-only", action="store_true", help="time --batch rows only")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="append one JSON line per family and dtype here")
    args = parser.parse_args()
    import torch

    print(
        f"# {time.strftime('%Y-%m-%d %H:%M')} torch {torch.__version__}, {args.threads} thread(s), load "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; prompt {args.prompt}, {args.tokens} new tokens, "
        f"best CPU s of {args.rounds}"
    )
    print("family | dtype | params (layers) | rows | tok/s: native | tf-runtime | tf-generate | vs generate | same")
    for family in args.families.split(","):
        with tempfile.TemporaryDirectory() as folder:
            count, layers, real = build(family, folder)
            for dtype in args.dtypes.split(","):
                result = measure(family, dtype, args, folder)
                result |= {"params": count, "layers": layers, "real_layers": real, "shape": FAMILIES[family][1]}
                result["load"] = round(os.getloadavg()[0], 2)
                for key in ("single" if rows == 1 else f"batch{rows}" for rows in _rows(args)):
                    r = result[key]
                    print(
                        f"{family} | {dtype} | {count / 1e6:.0f}M ({layers} of {real}) | {key} | "
                        f"{r['native']['tok_s']} | {r['tf-runtime']['tok_s']} | {r['tf-generate']['tok_s']} | "
                        f"{r['speedup_vs_generate']}x | {r['same_tokens']}",
                        flush=True,
                    )
                if args.json:
                    with open(args.json, "a", encoding="utf-8") as f:
                        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
