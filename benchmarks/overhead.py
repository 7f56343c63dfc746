"""Constrained vs unconstrained decoding speed on the default model, side by side.

Same prompt, same number of generated tokens: the constrained run (greedy) ends
where its grammar ends, after N tokens; the unconstrained run is then held to exactly
N tokens (stop tokens masked until N). Rounds alternate to spread machine noise over
both. Prints tokens/s of each, their ratio (goal >= 0.97 on CPU), and the per-token
mask time (fill + apply) of the constrained run.

    python benchmarks/overhead.py [--backend xgrammar] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SCHEMA = {
    "type": "object",
    "properties": {
        "countries": {
            "type": "array",
            "minItems": 6,
            "maxItems": 8,
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "capital": {"type": "string"}},
                "required": ["name", "capital"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["countries"],
    "additionalProperties": False,
}
PROMPT = "List six European countries with their capitals as JSON."


def run_once(lm, tokenizer, compiled, ids, *, max_tokens, min_tokens=0):
    from common import timed_decode

    # The mask's own cost: jump-forward off (benchmarks/jump_forward.py measures it).
    return timed_decode(lm, compiled, ids, max_tokens=max_tokens, min_tokens=min_tokens, jump_forward=False)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="xgrammar")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()

    import torch

    from sgcli.backends import check_supports
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model
    from sgcli.timing import percentile
    from sgcli.tokenizers import load_tokenizer

    ref = resolve_model(None)
    tokenizer = load_tokenizer(None)
    lm = load_model(ref, device="cpu", threads=args.threads)
    vocab = tokenizer.vocab.padded(lm.logits_width)
    spec = ConstraintSpec(
        Kind.JSON_SCHEMA, json.dumps(SCHEMA), "benchmark", json_options=JsonOptions(whitespace="compact")
    )
    constrained = check_supports(args.backend, spec).compile(spec, vocab)
    free = check_supports("none", spec).compile(spec, vocab)
    text, _ = tokenizer.render_chat([{"role": "user", "content": PROMPT}])
    ids = tokenizer.prompt_ids(text, templated=True)

    warm = run_once(lm, tokenizer, constrained, ids, max_tokens=400)  # also warms caches
    n = warm.completion_tokens
    c_rates, u_rates, mask_ms = [], [], []
    for _ in range(args.rounds):
        c = run_once(lm, tokenizer, constrained, ids, max_tokens=n)
        u = run_once(lm, tokenizer, free, ids, max_tokens=n, min_tokens=n)
        assert c.completion_tokens == u.completion_tokens == n, (c.completion_tokens, u.completion_tokens, n)
        c_rates.append(c.tokens_per_s)
        u_rates.append(u.tokens_per_s)
        mask_ms.extend(s * 1000 for s in c.mask_s)
    result = {
        "backend": args.backend,
        "model": ref.display,
        "torch_threads": torch.get_num_threads(),
        "generated_tokens": n,
        "rounds": args.rounds,
        "constrained_tokens_per_s": round(statistics.median(c_rates), 2),
        "unconstrained_tokens_per_s": round(statistics.median(u_rates), 2),
        "ratio": round(statistics.median(c_rates) / statistics.median(u_rates), 4),
        "mask_ms_p50": percentile(mask_ms, 0.5, 4),
        "mask_ms_p99": percentile(mask_ms, 0.99, 4),
        "output": warm.output,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"model {result['model']}  backend {args.backend}  {n} tokens x {args.rounds} rounds  "
        f"torch threads {result['torch_threads']}"
    )
    print(f"  constrained   {result['constrained_tokens_per_s']:8.2f} tok/s")
    print(f"  unconstrained {result['unconstrained_tokens_per_s']:8.2f} tok/s")
    print(f"  ratio         {result['ratio']:8.4f}   (goal >= 0.97)")
    print(f"  mask per token: p50 {result['mask_ms_p50']:.3f} ms, p99 {result['mask_ms_p99']:.3f} ms")
    print(f"  output: {warm.output[:120]}{'...' if len(warm.output) > 120 else ''}")


if __name__ == "__main__":
    main()
