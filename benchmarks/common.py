"""What the engine benchmarks share: the default model loaded once, prompts rendered, one decode timed."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load_default(threads: int | None, device: str = "cpu", dtype: str = "auto", impl: str = "auto"):
    """(tokenizer, loaded model) for the embedded default model. threads 0 = torch's own default;
    `impl`: whose forward pass runs it (native, transformers, or auto: native for this Llama)."""
    import torch

    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model
    from sgcli.tokenizers import load_tokenizer

    default = torch.get_num_threads()
    lm = load_model(resolve_model(None), device=device, dtype=dtype, threads=threads or None, impl=impl)
    if threads == 0:
        torch.set_num_threads(default)
        lm.threads = default
    return load_tokenizer(None), lm


def add_model_arguments(parser, *, dtype: str = "auto") -> None:
    """--threads, --device, --dtype and --model-impl: what `load_model_from_args` passes to `load_default`."""
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads; 0 = torch's own default")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=dtype)
    parser.add_argument("--model-impl", default="auto", choices=("auto", "native", "transformers"))


def load_model_from_args(args):
    """(tokenizer, loaded model) as `add_model_arguments`' flags say."""
    return load_default(args.threads, args.device, args.dtype, args.model_impl)


def chat_ids(tokenizer, prompt: str) -> list[int]:
    text, _ = tokenizer.render_chat([{"role": "user", "content": prompt}])
    return tokenizer.prompt_ids(text, templated=True)


def schema_spec(schema: dict, compact: bool = False):
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind

    options = JsonOptions(whitespace="compact" if compact else "flexible")
    return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "benchmark", json_options=options)


def machine_busy_seconds() -> float | None:
    """CPU seconds every core of this machine has spent busy since boot (Linux's /proc/stat: user,
    nice, system, irq, softirq and steal; not idle nor I/O wait, and not guest time, which user
    time already counts), or None where the system does not say."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            ticks = [int(v) for v in f.readline().split()[1:9]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class Clock:
    """Wall and CPU seconds of a block. On a machine shared with other work, wall time also counts
    the waits for a core; with one torch thread, CPU time is the work itself and far steadier.
    `busy`: the whole machine's busy CPU seconds over the block (None where unknown), for work done
    in other processes, such as a server's: its cores are `busy / wall`."""

    def __enter__(self):
        self.wall, self.cpu, self.busy = time.perf_counter(), time.process_time(), machine_busy_seconds()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        busy = machine_busy_seconds()
        self.busy = None if busy is None or self.busy is None else busy - self.busy


def timed_decode(lm, compiled, ids, *, max_tokens: int, min_tokens: int = 0, jump_forward: bool = True):
    """(Finished, Clock) for one greedy decode, prefill included; the repetition guard is off, so a run
    asked for `min_tokens` gives them (a random model repeats itself, and speed is what is measured)."""
    from sgcli.engine.decode import Finished, decode
    from sgcli.engine.sampling import SamplingParams

    with Clock() as clock:
        events = decode(
            lm,
            ids,
            compiled,
            params=SamplingParams(temperature=0.0),
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            jump_forward=jump_forward,
            repetition_guard=False,
        )
        finished = [e for e in events if isinstance(e, Finished)][0]
    return finished, clock


def reset_prefix_cache(url: str) -> str | None:
    """Empty a vLLM server's prefix cache before a run, so each run starts cold as an sgcli process
    does: where the server caches prefixes across requests, a round after the first would find its
    prompts' KV cached from the last one and skip their prefill (vLLM 0.32's CPU server measured here
    reported 0 prefix-cache hits, so there it changes nothing; docs/performance.md). Needs the server
    started with VLLM_SERVER_DEV_MODE=1 (scripts/serve-vllm.sh sets it); returns why it could not, or None."""
    import urllib.error
    import urllib.request

    try:
        request = urllib.request.Request(url.rstrip("/") + "/reset_prefix_cache", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=30):
            return None
    except (urllib.error.URLError, OSError) as exc:
        return f"the server's prefix cache could not be reset ({exc}): later rounds may find their prompts cached"
