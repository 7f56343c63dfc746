"""Batched vs sequential throughput on the default model, side by side, in one run.

The same JSONL-style requests (capital-city schema, greedy, same token budget) are decoded
one after another (the single-stream loop, as `generate --batch-size 1` does) and batched at
1, 4, 8 and 16 rows, on two workloads: every request with the same system prompt (its KV cache
is computed once and reused) and every request with its own system prompt (nothing shared but
the template's first tokens). Rounds alternate the order of the configurations. Prints aggregate
completion tokens per second of wall time and per second of this process's CPU time (steadier
on a shared machine), each with its ratio to sequential, and whether every batched output
equals its sequential output (for any that differ: the logit gap between the two tokens at the
first divergence, so a near tie shows as a near tie). `--vllm-url` adds a vLLM server at the
same concurrency, with the cores the machine kept busy during its run: vLLM's CPU server runs
its engine core and API server beside its one-thread model worker and kept both of two cores
busy, where sgcli decodes in `--threads` threads of one process. Goals (issue 8): batch 16 >= 8x
sequential; aggregate at 16 >= vLLM CPU's at 16 concurrent requests (174 tok/s measured).

    python benchmarks/batch_throughput.py [--requests 32] [--max-tokens 48] [--threads 1]
        [--dtype float32] [--vllm-url http://127.0.0.1:8000]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from common import Clock, reset_prefix_cache

SCHEMA = {
    "type": "object",
    "properties": {
        "country": {"type": "string"},
        "capital": {"type": "string"},
        "population_millions": {"type": "number"},
    },
    "required": ["country", "capital", "population_millions"],
    "additionalProperties": False,
}
COUNTRIES = (
    "France Japan Peru Kenya Italy Canada Egypt Chile Norway India Brazil Spain Ghana Nepal Cuba Iran "
    "Mexico Poland Sweden Turkey Vietnam Greece Ireland Portugal Austria Morocco Iceland Finland Bolivia "
    "Uganda Jordan Oman"
).split()
SYSTEM = (
    "You are a geography assistant. Answer every question with one JSON object that names the country, "
    "its capital city and its population in millions, with no extra text, no explanations and no markdown."
)


def workload(n: int, shared: bool):
    from sgcli.engine.session import Request

    requests = []
    for i in range(n):
        system = SYSTEM if shared else f"Request {i}: answer for {COUNTRIES[i % len(COUNTRIES)]} only. " + SYSTEM
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": f"What is the capital of {COUNTRIES[i % len(COUNTRIES)]}?"},
        ]
        requests.append(Request(f"r{i}", messages=messages))
    return requests


def sequential(session, prompts) -> list:
    """The single-stream loop, one prompt after another (what `generate --batch-size 1` runs)."""
    from sgcli.engine.decode import Finished, decode

    out = []
    for ids in prompts:
        events = decode(session.lm, ids, session.compiled, params=session.params, max_tokens=session.max_tokens)
        out.extend(e for e in events if isinstance(e, Finished))
    return out


def batched(
    session, prompts, size: int, positions: int | None = None, padded: bool = False, chunk: int | None = None
) -> list:
    """`decode_batch` at `size` rows; `positions`: the fed positions drafts may widen a CPU step
    to, in place of the engine's own `DRAFT_POSITIONS`; `padded`: every pass computes its padding
    positions too (the native forward's ragged packing off: `sgcli.engine.ragged`); `chunk`: the
    prompt tokens joining rows are fed a step, in place of `PREFILL_CHUNK` (0: passes of their own)."""
    from sgcli.engine import batching, kv_batch, ragged

    chosen, share, chunked = kv_batch.DRAFT_POSITIONS, ragged.PACK_PADDING_SHARE, batching.PREFILL_CHUNK
    if positions is not None:
        kv_batch.DRAFT_POSITIONS = positions
    if padded:
        ragged.PACK_PADDING_SHARE = 2.0  # no pass is that much padding
    if chunk is not None:
        batching.PREFILL_CHUNK = chunk
    try:
        done = dict(
            batching.decode_batch(
                session.lm,
                prompts,
                session.compiled,
                params=session.params,
                max_tokens=session.max_tokens,
                batch_size=size,
            )
        )
    finally:
        kv_batch.DRAFT_POSITIONS, ragged.PACK_PADDING_SHARE, batching.PREFILL_CHUNK = chosen, share, chunked
    return [done[i] for i in range(len(prompts))]


def batch_config(config: str) -> tuple[int, int | None, bool, int | None]:
    """ "batch 16" -> (16, None, False, None); "batch 16 d64" -> (16, 64, False, None); "batch 16
    padded" -> (16, None, True, None); "batch 16 p0" -> (16, None, False, 0): rows, the drafts'
    position bound, whether padding positions are computed, the prefill chunk."""
    words = config.split()
    positions = next((int(w[1:]) for w in words[2:] if w.startswith("d")), None)
    chunk = next((int(w[1:]) for w in words[2:] if w.startswith("p") and w[1:].isdigit()), None)
    return int(words[1]), positions, "padded" in words[2:], chunk


def timed(fn, *args):
    """(result, wall seconds, this process's CPU seconds, completion tokens). On a shared machine the
    CPU seconds are the steadier measure: other processes' load stretches wall time unevenly."""
    with Clock() as clock:
        finished = fn(*args)
    return finished, clock.wall, clock.cpu, sum(f.completion_tokens for f in finished)


def tie_gap(lm, prompt: list[int], a: list[int], b: list[int]) -> float:
    """|logit(a_k) - logit(b_k)| at the first position k where two token sequences differ
    (a length difference counts as the end-of-sequence token against the other's token)."""
    import torch

    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if k >= len(a) or k >= len(b):
        return float("nan")
    with torch.inference_mode():
        out = lm.model(input_ids=torch.tensor([prompt + a[:k]], device=lm.device), logits_to_keep=1)
    logits = out.logits[0, -1].float()
    return abs(float(logits[a[k]] - logits[b[k]]))


def vllm_rate(url: str, requests, concurrency: int, max_tokens: int) -> tuple[float, float | None, float]:
    """(aggregate completion tokens/s, cores busy, completion tokens per request) of an
    OpenAI-compatible server at this many concurrent requests. The cores are the whole machine's
    busy CPU seconds over the run per wall second (the server's processes, and this client's few):
    vLLM's CPU server keeps a second core busy beside its one-thread model worker (its engine
    core, a process of its own, schedules and fills grammar masks there), where sgcli decodes in
    `--threads` threads; None where the system does not say."""
    import concurrent.futures
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=30) as resp:
        model = json.load(resp)["data"][0]["id"]
    why = reset_prefix_cache(url)  # a cold start, as sgcli's own batch has
    if why:
        print(f"note: {why}")

    def one(req) -> int:
        body = {
            "model": model,
            "messages": req.messages,
            "max_tokens": max_tokens,
            "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}},
        }
        http = urllib.request.Request(
            url.rstrip("/") + "/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(http, timeout=600) as resp:
            return json.load(resp)["usage"]["completion_tokens"]

    with Clock() as clock, concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        tokens = sum(pool.map(one, requests))
    return tokens / clock.wall, None if clock.busy is None else clock.busy / clock.wall, tokens / len(requests)


def vllm_note(url: str | None) -> str | None:
    if url:
        return None
    try:
        import vllm  # noqa: F401

        why = "vLLM is installed but no --vllm-url was given (start one with scripts/serve-vllm.sh)"
    except ImportError:
        why = "vLLM is not installed here and no --vllm-url was given"
    return f"vLLM column skipped: {why}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--batch-sizes", default="1,4,8,16")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--workloads", default="same-system,distinct", help="same-system (one system prompt for all) and/or distinct"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="xgrammar")
    parser.add_argument(
        "--layout",
        default="compact",
        choices=("compact", "flexible"),
        help="the JSON whitespace sgcli's grammar allows: match the vLLM server's, which reads it from its start-up "
        "config (flexible by default; scripts/serve-vllm.sh serve PORT "
        '--structured-outputs-config {"backend": "xgrammar", "disable_any_whitespace": true} serves compact)',
    )
    parser.add_argument(
        "--draft-positions",
        default="",
        help="comma-separated bounds on a step's fed positions for drafts, each run beside the engine's own choice",
    )
    parser.add_argument(
        "--prefill-chunks",
        default="",
        help="comma-separated prompt tokens a step for joining rows (0: prefill passes of their own), each run "
        "beside the engine's own PREFILL_CHUNK",
    )
    parser.add_argument(
        "--compare-padded",
        action="store_true",
        help="also run each batch size with the padding of its passes computed (ragged packing off), alternating",
    )
    parser.add_argument("--vllm-url", default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    workloads = args.workloads.split(",")
    if set(workloads) - {"same-system", "distinct"}:
        raise SystemExit(f"--workloads {args.workloads}: use same-system and/or distinct")
    sizes = [int(s) for s in args.batch_sizes.split(",")]

    from sgcli import backends
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
    from sgcli.engine import batching, kv_batch
    from sgcli.engine.loader import load_model
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Session
    from sgcli.models.refs import resolve_model
    from sgcli.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(None)
    lm = load_model(resolve_model(None), device=args.device, dtype=args.dtype, threads=args.threads)
    layout = JsonOptions(whitespace=args.layout)
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(SCHEMA), "bench", json_options=layout)
    compiled, _ = backends.compile_for(args.backend, spec, tokenizer.vocab.padded(lm.logits_width))
    session = Session(lm, tokenizer, compiled, SamplingParams(temperature=0.0), args.max_tokens, (), PromptOptions())
    print(
        f"model {lm.ref.display} {lm.dtype} on {lm.device} ({lm.impl} forward, kernel {lm.kernel or 'torch'}, "
        f"drafts up to {kv_batch.DRAFT_POSITIONS if lm.device == 'cpu' else 'any'} positions a step, "
        f"prefill chunk {batching.PREFILL_CHUNK} tokens), "
        f"threads {args.threads}, backend {compiled.backend}, {args.layout} JSON, "
        f"{args.requests} requests x <= {args.max_tokens} tokens, {args.rounds} round(s)"
    )
    results = {}
    for shared in [w == "same-system" for w in workloads]:
        requests = workload(args.requests, shared)
        prompts = [session.render(r)[1] for r in requests]
        bounds = [int(b) for b in args.draft_positions.split(",") if b]
        chunks = [f" p{int(c)}" for c in args.prefill_chunks.split(",") if c]
        suffixes = ["", *[f" d{b}" for b in bounds], *chunks, *([" padded"] if args.compare_padded else [])]
        configs = ["sequential", *[f"batch {n}{suffix}" for n in sizes for suffix in suffixes]]
        rates = {c: [] for c in configs}
        reference = None
        outputs = {}
        for r in range(args.rounds):
            for c in configs if r % 2 == 0 else configs[::-1]:
                if c == "sequential":
                    finished, wall, cpu, tokens = timed(sequential, session, prompts)
                    reference = reference or finished
                else:
                    finished, wall, cpu, tokens = timed(batched, session, prompts, *batch_config(c))
                    outputs[c] = finished
                rates[c].append((tokens / wall, tokens / cpu))
        label = "shared system prompt" if shared else "distinct system prompts"
        results[label] = report(session.lm, requests, prompts, label, rates, reference, outputs, args)
    note = vllm_note(args.vllm_url)
    if note:
        print(note)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


def report(lm, requests, prompts, label, rates, reference, batched, args) -> dict:
    """Print one workload's table (best round per configuration); returns it as data."""
    seq_wall, seq_cpu = (max(v[k] for v in rates["sequential"]) for k in (0, 1))
    print(f"\n{label}:")
    print(
        f"  {'config':<16} {'tok/s':>7} {'x seq':>6} {'tok/cpu-s':>9} {'x seq':>6} {'tok/req':>7} {'same as seq':>11}"
        "  vLLM tok/s (machine cores busy, tok/cpu-s, tok/req)"
    )
    out = {}
    for c, values in rates.items():
        wall, cpu = (max(v[k] for v in values) for k in (0, 1))
        outputs = batched.get(c, reference)
        per_request = sum(f.completion_tokens for f in outputs) / len(outputs)
        same, gaps = "-", []
        if c in batched:
            pairs = zip(prompts, reference, batched[c])
            gaps = [tie_gap(lm, p, a.token_ids, b.token_ids) for p, a, b in pairs if a.token_ids != b.token_ids]
            same = f"{len(prompts) - len(gaps)}/{len(prompts)}"
        vllm, server = "-", {}
        if args.vllm_url and c.startswith("batch") and batch_config(c)[1] is None:
            try:
                rate, cores, served = vllm_rate(args.vllm_url, requests, batch_config(c)[0], args.max_tokens)
            except (OSError, ValueError, KeyError, IndexError) as exc:  # a server that went away costs its column only
                vllm = f"unreachable ({exc})"
            else:
                server = {
                    "vllm_tokens_per_s": round(rate, 2),
                    "vllm_cores": cores and round(cores, 2),
                    "vllm_tokens_per_request": round(served, 1),
                }
                on = f" on {cores:.2f} cores ({rate / cores:.1f} tok/cpu-s" if cores else " ("
                vllm = f"{rate:.1f}{on}, {served:.1f} tok/req)"
        gap_note = f"  (logit gaps at divergence: {', '.join(f'{g:.2e}' for g in gaps)})" if gaps else ""
        print(
            f"  {c:<16} {wall:7.1f} {wall / seq_wall:6.2f} {cpu:9.1f} {cpu / seq_cpu:6.2f}"
            f" {per_request:7.1f} {same:>11}  {vllm}{gap_note}"
        )
        out[c] = {
            "tokens_per_s": round(wall, 2),
            "x_sequential": round(wall / seq_wall, 2),
            "tokens_per_cpu_s": round(cpu, 2),
            "x_sequential_cpu": round(cpu / seq_cpu, 2),
            "tokens_per_request": round(per_request, 1),
            "same": same,
            "gaps": gaps,
            **server,
        }
    return out


if __name__ == "__main__":
    main()
