"""sgcli's decode loop vs transformers `generate` + xgrammar's `LogitsProcessor`, on the SAME loaded
model object, schema, prompt, token budget and dtype, greedy; rounds alternate.

The peer needs transformers' model, so both run it (`sgcli_*`, `sgcli_vs_peer`). sgcli's default
for this model is its native forward (`sgcli.engine.llama`), loaded as a second copy of the same
weights and timed in the same rounds (`native_*`, `native_vs_peer`); `same_tokens_native` checks
that it wrote what the transformers model did.

The peer is what a user has without sgcli: `model.generate(..., logits_processor=[xgr.contrib.hf.
LogitsProcessor(compiled)])`. Both use the grammar sgcli's xgrammar backend compiled for the
model's vocabulary. Tok/s = generated tokens / time of the whole call (prefill included), per CPU
second (`*_tok_s`, steady on a shared machine with one torch thread) and per wall second (`*_wall`).

    python benchmarks/jump_forward_peer.py [--threads 1] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics

from common import Clock, add_model_arguments, chat_ids, load_default, schema_spec, timed_decode
from jump_forward import FIXED_KEYS


def peer_generate(lm, compiled, ids: list[int], max_tokens: int) -> tuple[list[int], Clock]:
    import torch
    from xgrammar.contrib.hf import LogitsProcessor

    processor = LogitsProcessor(compiled.handle)  # one per generate() call, as documented
    with Clock() as clock, torch.inference_mode():
        out = lm.model.generate(
            torch.tensor([ids], device=lm.device),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=lm.device),
            logits_processor=[processor],
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=list(compiled.vocab.stop_ids),
            pad_token_id=compiled.vocab.stop_ids[0],
        )
    return out[0, len(ids) :].tolist(), clock


def compare(tokenizer, lm, rounds: int, max_tokens: int, native=None) -> list[dict]:
    from sgcli import backends

    vocab = tokenizer.vocab.padded(lm.logits_width)
    rows = []
    for compact in (True, False):
        spec = schema_spec(FIXED_KEYS, compact)
        compiled = backends.check_supports("xgrammar", spec).compile(spec, vocab)
        ids = chat_ids(tokenizer, "Describe France as JSON.")
        rates: dict[str, list[float]] = {}
        for _ in range(rounds):
            ours, t_ours = timed_decode(lm, compiled, ids, max_tokens=max_tokens)
            plain, t_plain = timed_decode(lm, compiled, ids, max_tokens=max_tokens, jump_forward=False)
            theirs, t_theirs = peer_generate(lm, compiled, ids, max_tokens)
            theirs = [t for t in theirs if t not in compiled.vocab.stop_ids]
            timed = [
                ("sgcli", len(ours.token_ids), t_ours),
                ("sgcli_no_jf", len(plain.token_ids), t_plain),
                ("peer", len(theirs), t_theirs),
            ]
            if native is not None:
                mine, t_mine = timed_decode(native, compiled, ids, max_tokens=max_tokens)
                timed.append(("native", len(mine.token_ids), t_mine))
            for key, n, clock in timed:
                rates.setdefault(key, []).append(n / clock.cpu)
                rates.setdefault(f"{key}_wall", []).append(n / clock.wall)
        med = {k: round(statistics.median(v), 2) for k, v in rates.items()}
        rows.append(
            {
                "layout": "compact" if compact else "flexible",
                "tokens": len(ours.token_ids),
                "peer_tokens": len(theirs),
                "forced_tokens": ours.forced_tokens,
                **{f"{k}_tok_s": v for k, v in med.items()},
                "sgcli_vs_peer": round(med["sgcli"] / med["peer"], 3),
                "sgcli_vs_peer_wall": round(med["sgcli_wall"] / med["peer_wall"], 3),
                "sgcli_no_jf_vs_peer": round(med["sgcli_no_jf"] / med["peer"], 3),
                "same_tokens_as_peer": theirs == ours.token_ids,
                **(
                    {
                        "native_vs_peer": round(med["native"] / med["peer"], 3),
                        "native_vs_peer_wall": round(med["native_wall"] / med["peer_wall"], 3),
                        "same_tokens_native": mine.token_ids == ours.token_ids,
                    }
                    if native is not None
                    else {}
                ),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=120)
    args = parser.parse_args()
    tokenizer, lm = load_default(args.threads, args.device, args.dtype, "transformers")  # generate() needs it
    native = (
        None if args.model_impl == "transformers" else load_default(args.threads, args.device, args.dtype, "native")[1]
    )
    print(f"# model {lm.ref.display} on {lm.device} {lm.dtype}, torch threads {lm.threads}, {args.rounds} rounds")
    if native is not None:
        print(f"# native forward: kernel {native.kernel or 'torch'}")
    compare(tokenizer, lm, args.rounds, args.max_tokens, native)


if __name__ == "__main__":
    main()
