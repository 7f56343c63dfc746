"""What a bounded compile costs, and whether a thread could have done the job.

For each backend and grammar, measured side by side in interleaved rounds:
  plain    backend.compile in this process (sgcli's adapter, no limits)
  bounded  sgcli.backends.bounded.compile_bounded: once, in process under the time limit for a
           small constraint on llguidance/xgrammar, else in a forked child
and, once per backend on a slow grammar, whether the library holds the GIL while compiling:
a compile runs in a daemon thread while the main thread sleeps 1 ms at a time and counts how
often it woke up (a library holding the GIL would starve it: few ticks, one long gap).

`--suite`: every schema of JSON-Schema-Test-Suite draft2020-12 ($SGCLI_CORPORA), interleaved per
schema (the order of the sides rotates), every side on the very same text, native stderr sent to
/dev/null. xgrammar caches compiles in memory, also parts of them (a schema differing only in its
`$comment` compiled in 4-7 ms where the first took 35), so whichever side went first would pay for
the others; it runs twice, each side meeting the same cache state (set up outside the timing):
  cold     the cache emptied before each call, as in a fresh `sgcli compile` process
  warm     emptied, then the schema compiled once with another `$comment`: the parts are cached,
           the schema itself is not (a long-running process that saw a similar schema)
The sides:
  library  the library's own compile of exactly what the adapter hands it, built outside the timing
           from the adapter itself: llguidance `LLMatcher(tok, g)` with g the adapter's `grammar()` text
           (its x-guidance options and all), xgrammar `compile_json_schema(text, **kwargs)` with the
           adapter's keyword arguments; on the adapter's tokenizer objects, built once
  adapter  backend.compile (sgcli's adapter: error positions, warnings), no limits
  sgcli    compile_cached with the default limits and a private cache, main-thread compiles under
           the watchdog as in the `sgcli` process: what `sgcli compile` runs
Each schema is measured `--repeat` times (3) per side, in interleaved rounds, each round under its own
`$comment`; the median of its rounds is its time (one pass measured +-15% at p50 on a busy machine).
p50 and p90 of each over all schemas, over those that compile and over those both refuse (a
refusal is an error matcher for llguidance, an exception for xgrammar, a positioned error in
sgcli); the ratios sgcli/library and sgcli/adapter. Every schema is checked outside the timing:
the library and the adapter compile the same grammar (llguidance: the same text; xgrammar: the same
normalized EBNF) and refuse the same schemas, else the run stops.

Usage:  python benchmarks/compile_limits.py [--rounds 5]
        SGCLI_CORPORA=/path/to/corpora python benchmarks/compile_limits.py --suite [--backend llguidance] [--repeat 3]
        python benchmarks/compile_limits.py --suite --folder SCHEMAS/   # real-world schemas instead of the suite
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
    """(prepare, refused, same): `prepare(spec)` builds, outside the timing, the library's own compile
    of exactly what the adapter hands the library for `spec`, as a call to time; `refused(result)`
    says whether that compile failed; `same(result, compiled)` whether both compiled one grammar."""
    from sgcli.errors import UserError

    if name == "llguidance":
        import llguidance as llg

        tok = backend.tokenizer(vocab)

        def prepare(spec):
            try:
                grammar = backend.grammar(spec, tok)
            except UserError:  # the adapter refuses it before the library sees it (malformed JSON)
                return lambda: None
            return lambda: (grammar, llg.LLMatcher(tok, grammar, log_level=0))

        return (
            prepare,
            lambda result: result is None or result[1].is_error(),
            lambda result, compiled: compiled.normalized == result[0],
        )
    from sgcli.backends.xgrammar_json import json_format_kwargs, json_safe

    compiler = backend._compiler(vocab)

    def prepare(spec):
        kwargs = json_format_kwargs(spec.json_options)
        return lambda: compiler.compile_json_schema(spec.text, **kwargs)

    def same(result, compiled) -> bool:
        """The library's grammar with its string classes narrowed as the adapter narrows them
        (`json_safe`, which the library call does not pay for) is the adapter's grammar."""
        return str(json_safe(result.grammar)) == compiled.normalized

    return prepare, lambda result: result is None, same


def _tagged(text: str, tag: str) -> str:
    """The schema text with a `$comment` first (boolean schemas have no room for one)."""
    if not text.startswith("{"):
        return text
    return f'{{"$comment": "{tag}"' + ("}" if text == "{}" else ", " + text[1:])


def _cache_reset(backend, vocab, mode: str):
    """What runs before each timed call (xgrammar): the same cache state for every side; it is
    given the schema with another `$comment`, compiled the way that side compiles (the library's
    call for the library, sgcli's adapter for sgcli: the adapter narrows the string classes, so a
    cache warmed by the library's grammar would not hold the adapter's parts)."""
    if not mode:
        return lambda text, side: None
    from sgcli.backends.xgrammar_json import json_format_kwargs
    from sgcli.errors import UserError

    compiler = backend._compiler(vocab)
    kwargs = json_format_kwargs(ConstraintSpec(Kind.JSON_SCHEMA).json_options)

    def reset(similar: str, side: str) -> None:
        compiler.clear_cache()
        if mode == "warm" and similar.startswith("{"):
            try:
                if side == "library":
                    compiler.compile_json_schema(similar, **kwargs)
                else:
                    backend.compile(ConstraintSpec(Kind.JSON_SCHEMA, similar, "s.json"), vocab)
            except (RuntimeError, UserError):
                pass

    return reset


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))] * 1000


def _timed(call) -> tuple[float, object]:
    """(seconds, result); a refused compile (an exception) takes its time too and gives None."""
    from sgcli.errors import UserError

    t = time.perf_counter()
    try:
        result = call()
    except (UserError, RuntimeError, ValueError):
        result = None
    return time.perf_counter() - t, result


def suite(backends: list[str], repeat: int, folder=None) -> None:
    import os
    import resource
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from json_schema_suite import suite_files

    from sgcli.backends.compile_cache import compile_cached

    os.environ["SGCLI_CACHE_DIR"] = tempfile.mkdtemp(prefix="sgcli-bench-cache-")
    vocab = load_tokenizer(None).vocab
    if folder is None:
        texts = [json.dumps(case["schema"]) for path in suite_files() for case in json.loads(path.read_text())]
    else:  # real-world schemas as their files hold them (Schema Store, Kubernetes: up to 240 KB each)
        from corpus_paths import json_files

        texts = [p.read_text(encoding="utf-8-sig").strip() for p in json_files(Path(folder))]
    skipped = 0
    runs = [(name, mode) for name in backends for mode in (("cold", "warm") if name == "xgrammar" else ("",))]
    for name, mode in runs:
        backend = get_backend(name)
        backend.prepare(vocab)
        prepare, refused, same = _library_call(name, backend, vocab)
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        reset = _cache_reset(backend, vocab, mode)
        names = ("library", "adapter", "sgcli")
        times: dict[str, list[float]] = {side: [] for side in names}
        failed: list[bool] = []
        saved = os.dup(2)
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)  # the libraries' own warnings cost a write, not a terminal
        try:
            for i, original in enumerate(texts):
                runs_of: dict[str, list[float]] = {side: [] for side in names}
                for r in range(repeat):
                    # a `$comment` per schema and round, the same on every side: no text twice (sgcli's disk cache)
                    text = _tagged(original, f"s{i}r{r}")
                    spec = ConstraintSpec(Kind.JSON_SCHEMA, text, "s.json")
                    calls = {
                        "library": prepare(spec),
                        "adapter": lambda b=backend, s=spec: b.compile(s, vocab),
                        "sgcli": lambda b=backend, s=spec: compile_cached(b, s, vocab).compiled,
                    }
                    results = {}
                    turn = (i * repeat + r) % 3
                    for side in names[turn:] + names[:turn]:  # rotated: no side always goes first
                        reset(_tagged(original, f"w{i}r{r}"), side)
                        elapsed, results[side] = _timed(calls[side])
                        runs_of[side].append(elapsed)
                    outcome = {refused(results["library"]), results["adapter"] is None, results["sgcli"] is None}
                    if len(outcome) != 1 and folder is not None:
                        break  # sgcli refuses before the library sees it (a remote $ref, a limit): not comparable
                    if len(outcome) != 1:
                        raise SystemExit(f"{name}: schema {i}: the library and sgcli disagree on refusing it: {text}")
                    if results["adapter"] is not None and not same(results["library"], results["adapter"]):
                        raise SystemExit(f"{name}: schema {i}: the library compiled another grammar: {text}")
                if len(outcome) != 1:
                    skipped += 1
                    continue
                for side, runs in runs_of.items():
                    times[side].append(statistics.median(runs))
                failed.append(outcome.pop())
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_kb) / 1024
        title = f"{name} ({mode} cache)" if mode else name
        counts = f"{failed.count(False)} compiled, {failed.count(True)} refused by both"
        print(f"{title}: {len(texts)} schemas, {counts}" + (f", {skipped} not comparable (skipped)" if skipped else ""))
        skipped = 0
        for label, keep in (("all", None), ("compiled", False), ("refused", True)):
            picked = {side: [t for t, f in zip(v, failed) if keep is None or f == keep] for side, v in times.items()}
            if not picked["sgcli"]:
                continue  # none in this group (real-world folders: often nothing refused by both)
            p = {side: (_quantile(v, 0.5), _quantile(v, 0.9)) for side, v in picked.items()}
            cells = "  ".join(f"{side} {p50:6.3f}/{p90:6.3f} ms" for side, (p50, p90) in p.items())
            ratio = "  ".join(
                f"sgcli/{ref} {p['sgcli'][0] / p[ref][0]:4.2f}x/{p['sgcli'][1] / p[ref][1]:4.2f}x"
                for ref in ("library", "adapter")
            )
            print(f"  {label:9} p50/p90: {cells}  {ratio}")
        print(f"  peak RSS +{grown:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--suite", action="store_true", help="compile p50/p90 on JSON-Schema-Test-Suite")
    parser.add_argument("--backend", action="append", help="with --suite: llguidance, xgrammar (default both)")
    parser.add_argument("--repeat", type=int, default=3, help="with --suite: rounds per schema, their median counts")
    parser.add_argument("--folder", help="with --suite: every *.json schema of this folder instead of the suite")
    args = parser.parse_args()
    import os

    from sgcli.backends.bounded import set_overrun_handler

    set_overrun_handler(lambda error: os._exit(2))  # as the `sgcli` process does: main-thread compiles
    if args.suite:
        suite(args.backend or ["llguidance", "xgrammar"], args.repeat, args.folder)
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
