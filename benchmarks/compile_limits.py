"""What a bounded compile costs, and whether a thread could have done the job.

For each backend and grammar, measured side by side in interleaved rounds:
  plain    backend.compile in this process (sgcli's adapter, no limits)
  bounded  sgcli.backends.bounded.compile_bounded: once, in process under the time limit for a
           small constraint on llguidance/xgrammar, else in a forked child
and, once per backend on a slow grammar, whether the library holds the GIL while compiling:
a compile runs in a daemon thread while the main thread sleeps 1 ms at a time and counts how
often it woke up (a library holding the GIL would starve it: few ticks, one long gap).

`--suite`: every schema of JSON-Schema-Test-Suite draft2020-12 ($SGCLI_CORPORA), interleaved per
schema, each side with its own text (a `$comment`, so xgrammar's compile cache never answers):
  library  the library's own call (llguidance `LLMatcher(tok, grammar_from_json_schema(s))`,
           xgrammar `GrammarCompiler.compile_json_schema(s)`) on the same tokenizer objects
  adapter  backend.compile (sgcli's adapter: error positions, warnings), no limits
  sgcli    compile_cached with the default limits and a private cache, main-thread compiles under
           the watchdog as in the `sgcli` process: what `sgcli compile` runs
p50 and p90 of each, and the ratios sgcli/library and sgcli/adapter.

Usage:  python benchmarks/compile_limits.py [--rounds 5]
        SGCLI_CORPORA=/path/to/corpora python benchmarks/compile_limits.py --suite [--backend llguidance]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

from sgcli.backends import get_backend
from sgcli.backends.bounded import compile_bounded
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.tokenizers import load_tokenizer


def _object_schema(n: int, tag: str) -> str:
    props = {f"{tag}{i}": {"type": "string", "minLength": 3, "maxLength": 40} for i in range(n)}
    return json.dumps({"type": "object", "properties": props, "required": list(props)})


CASES = [
    ("xgrammar", Kind.REGEX, "[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    ("xgrammar", Kind.JSON_SCHEMA, "object40"),
    ("llguidance", Kind.JSON_SCHEMA, "object40"),
    ("llguidance", Kind.REGEX, "[a-z]{1,300}"),
    ("outlines_core", Kind.REGEX, "[a-z]{1,100}"),
]


def _spec(kind: Kind, text: str, round_no: int) -> ConstraintSpec:
    if text == "object40":  # a fresh schema each round: xgrammar caches compiles in memory
        text = _object_schema(40, f"r{round_no}_")
    return ConstraintSpec(kind, text, "bench")


def _gil_ticks(backend, spec, vocab) -> tuple[float, int, float]:
    done = threading.Event()
    thread = threading.Thread(target=lambda: (backend.compile(spec, vocab), done.set()), daemon=True)
    start = last = time.perf_counter()
    ticks, gap = 0, 0.0
    thread.start()
    while not done.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        ticks, gap, last = ticks + 1, max(gap, now - last), now
    return time.perf_counter() - start, ticks, gap


def _library_call(name: str, backend, vocab):
    """The library's own compile of a schema text, without sgcli's adapter."""
    if name == "llguidance":
        import llguidance as llg

        tok = backend.tokenizer(vocab)
        return lambda text: llg.LLMatcher(tok, llg.LLMatcher.grammar_from_json_schema(text), log_level=0)
    compiler = backend._compiler(vocab)
    return lambda text: compiler.compile_json_schema(text)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))] * 1000


def suite(backends: list[str]) -> None:
    import os
    import tempfile

    from benchmarks.json_schema_suite import suite_files
    from sgcli.backends.compile_cache import compile_cached
    from sgcli.errors import UserError

    os.environ["SGCLI_CACHE_DIR"] = tempfile.mkdtemp(prefix="sgcli-bench-cache-")
    vocab = load_tokenizer(None).vocab
    texts = [json.dumps(case["schema"]) for path in suite_files() for case in json.loads(path.read_text())]
    import resource

    for name in backends:
        backend = get_backend(name)
        backend.prepare(vocab)
        library = _library_call(name, backend, vocab)
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        sides = {
            "library": library,
            "adapter": lambda text, b=backend: b.compile(ConstraintSpec(Kind.JSON_SCHEMA, text, "s.json"), vocab),
            "sgcli": lambda text, b=backend: compile_cached(b, ConstraintSpec(Kind.JSON_SCHEMA, text, "s.json"), vocab),
        }
        times: dict[str, list[float]] = {side: [] for side in sides}
        for i, text in enumerate(texts):
            for side, run in sides.items():
                tagged = text if not text.startswith("{") or text == "{}" else f'{{"$comment": "{side}{i}", {text[1:]}'
                t = time.perf_counter()
                try:
                    run(tagged)
                except (UserError, RuntimeError, ValueError):  # compile errors take their time too
                    pass
                times[side].append(time.perf_counter() - t)
        p = {side: (_quantile(v, 0.5), _quantile(v, 0.9)) for side, v in times.items()}
        cells = "  ".join(f"{side} {p50:6.2f}/{p90:6.2f} ms" for side, (p50, p90) in p.items())
        ratio = "  ".join(
            f"sgcli/{ref} {p['sgcli'][0] / p[ref][0]:4.2f}x/{p['sgcli'][1] / p[ref][1]:4.2f}x"
            for ref in ("library", "adapter")
        )
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_kb) / 1024
        print(f"{name:11} {len(texts)} schemas  p50/p90: {cells}  {ratio}  peak RSS +{grown:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suite", action="store_true", help="compile p50/p90 on JSON-Schema-Test-Suite")
    parser.add_argument("--backend", action="append", help="with --suite: llguidance, xgrammar (default both)")
    args = parser.parse_args()
    import os

    from sgcli.backends.bounded import set_overrun_handler

    set_overrun_handler(lambda error: os._exit(2))  # as the `sgcli` process does: main-thread compiles
    if args.suite:
        suite(args.backend or ["llguidance", "xgrammar"])
        return
    vocab = load_tokenizer(None).vocab
    for name, kind, text in CASES:
        backend = get_backend(name)
        backend.prepare(vocab)
        plain, bounded = [], []
        for r in range(args.rounds):  # interleaved, each with its own fresh grammar where it matters
            for label, runs in (("plain", plain), ("bounded", bounded)):
                spec = _spec(kind, text, 2 * r + (label == "bounded"))
                t = time.perf_counter()
                if label == "plain":
                    backend.compile(spec, vocab)
                else:
                    compile_bounded(backend, spec, vocab)
                runs.append(time.perf_counter() - t)
        p, b = statistics.median(plain), statistics.median(bounded)
        print(f"{name:14} {text[:28]:28} plain {p * 1000:8.1f} ms  bounded {b * 1000:8.1f} ms  ratio {b / p:5.2f}")
    print("\nGIL while compiling (main thread ticks every 1 ms while a thread compiles):")
    slow = {
        "xgrammar": (Kind.JSON_SCHEMA, _object_schema(150, "gil")),
        "llguidance": (Kind.JSON_SCHEMA, _object_schema(150, "gil")),
        "outlines_core": (Kind.REGEX, "[a-z]{1,300}"),
    }
    for name, (kind, text) in slow.items():
        wall, ticks, gap = _gil_ticks(get_backend(name), ConstraintSpec(kind, text), vocab)
        print(
            f"{name:14} compile {wall * 1000:8.1f} ms  main-thread ticks {ticks:6d}  longest gap {gap * 1000:6.1f} ms"
        )


if __name__ == "__main__":
    main()
