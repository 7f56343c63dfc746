"""Jump-forward vs the plain loop vs unconstrained, per backend, side by side on the default model.

Two schemas: a fixed-key one (most output bytes are keys, quotes and punctuation the grammar
forces) and a free-text-heavy one. Per backend the constrained run is greedy and ends where
the grammar ends (N tokens); the unconstrained run is held to exactly N tokens. Rounds
alternate all variants so machine noise hits each alike. Effective tok/s = generated tokens
/ time of the whole decode (prefill included), the same for every variant, per CPU second
(steady on a shared machine with one torch thread) and per wall second.

    python benchmarks/jump_forward.py [--threads 1] [--rounds 2] [--backends xgrammar,llguidance]
"""

from __future__ import annotations

import argparse
import json
import statistics

from common import add_model_arguments, chat_ids, load_model_from_args, schema_spec, timed_decode

FIXED_KEYS = {
    "type": "object",
    "properties": {
        "country": {"type": "string", "maxLength": 40},
        "capital": {"type": "string", "maxLength": 40},
        "continent": {"enum": ["Africa", "Asia", "Europe", "North America", "Oceania", "South America"]},
        "population_in_millions": {"type": "integer"},
        "official_languages": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3},
        "is_landlocked": {"type": "boolean"},
    },
    "required": ["country", "capital", "continent", "population_in_millions", "official_languages", "is_landlocked"],
    "additionalProperties": False,
}
FREE_TEXT = {
    "type": "object",
    "properties": {"title": {"type": "string", "maxLength": 60}, "story": {"type": "string", "maxLength": 600}},
    "required": ["title", "story"],
    "additionalProperties": False,
}
CASES = [
    ("fixed-key, compact", FIXED_KEYS, True, "Describe France as JSON."),
    ("fixed-key, flexible", FIXED_KEYS, False, "Describe France as JSON."),
    ("free text", FREE_TEXT, True, "Write a very short story about a lighthouse keeper, as JSON."),
]


def measure(tokenizer, lm, backends_, rounds: int, max_tokens: int) -> list[dict]:
    from sgcli import backends

    vocab = tokenizer.vocab.padded(lm.logits_width)
    rows = []
    for label, schema, compact, prompt in CASES:
        spec, ids = schema_spec(schema, compact), chat_ids(tokenizer, prompt)
        free = backends.check_supports("none", spec).compile(spec, vocab)
        for name in backends_:
            compiled = backends.check_supports(name, spec).compile(spec, vocab)
            first, _ = timed_decode(lm, compiled, ids, max_tokens=max_tokens)  # warms caches
            n = first.completion_tokens
            rates: dict[str, list[float]] = {}
            same = True
            for _ in range(rounds):
                jf, c_jf = timed_decode(lm, compiled, ids, max_tokens=n)
                plain, c_plain = timed_decode(lm, compiled, ids, max_tokens=n, jump_forward=False)
                free_run, c_free = timed_decode(lm, free, ids, max_tokens=n, min_tokens=n)
                same &= jf.token_ids == plain.token_ids
                # float32: a forced token fed with the token before it gives the very logits it gets alone;
                # in bfloat16 the wider pass may round differently and part at a logit tie (counted instead)
                assert same or lm.dtype != "float32", (name, label)
                assert free_run.completion_tokens == n
                for key, clock in (("jump", c_jf), ("plain", c_plain), ("none", c_free)):
                    rates.setdefault(f"{key}_cpu", []).append(n / clock.cpu)
                    rates.setdefault(f"{key}_wall", []).append(n / clock.wall)
            med = {k: statistics.median(v) for k, v in rates.items()}
            rows.append(
                {
                    "case": label,
                    "backend": name,
                    "tokens": n,
                    "forced_tokens": first.forced_tokens,
                    "forward_passes": first.forward_passes,
                    **{f"{k}_tok_s": round(v, 2) for k, v in med.items()},
                    "jump_vs_unconstrained_cpu": round(med["jump_cpu"] / med["none_cpu"], 3),
                    "jump_vs_plain_cpu": round(med["jump_cpu"] / med["plain_cpu"], 3),
                    "plain_vs_unconstrained_cpu": round(med["plain_cpu"] / med["none_cpu"], 3),
                    "jump_vs_unconstrained_wall": round(med["jump_wall"] / med["none_wall"], 3),
                    "valid_json": _is_json(first.output),
                    "same_tokens_as_plain": same,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=120)
    parser.add_argument("--backends", default="xgrammar,llguidance,outlines_core")
    args = parser.parse_args()
    tokenizer, lm = load_model_from_args(args)
    print(f"# model {lm.ref.display} on {lm.device} {lm.dtype}, torch threads {lm.threads}, {args.rounds} rounds")
    rows = measure(tokenizer, lm, args.backends.split(","), args.rounds, args.max_tokens)
    print(
        "| case | backend | tokens (forced) | passes | tok per CPU-s: jump-forward / plain / unconstrained "
        "| jump/unconstrained (CPU) | jump/plain (CPU) | plain/unconstrained (CPU) | jump/unconstrained (wall) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['backend']} | {r['tokens']} ({r['forced_tokens']}) | {r['forward_passes']} "
            f"| {r['jump_cpu_tok_s']} / {r['plain_cpu_tok_s']} / {r['none_cpu_tok_s']} "
            f"| {r['jump_vs_unconstrained_cpu']} | {r['jump_vs_plain_cpu']} | {r['plain_vs_unconstrained_cpu']} "
            f"| {r['jump_vs_unconstrained_wall']} |"
        )


if __name__ == "__main__":
    main()
