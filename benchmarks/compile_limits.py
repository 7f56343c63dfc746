"""What a bounded compile costs, and whether a thread could have done the job.

For each backend and grammar, measured side by side in interleaved rounds:
  plain    backend.compile in this process (what sgcli did before limits)
  bounded  sgcli.backends.bounded.compile_bounded: the compile in a forked child under the
           limits, then again in the parent
and, once per backend on a slow grammar, whether the library holds the GIL while compiling:
a compile runs in a daemon thread while the main thread sleeps 1 ms at a time and counts how
often it woke up (a library holding the GIL would starve it: few ticks, one long gap).

Usage:  python benchmarks/compile_limits.py [--rounds 5]
Prints one line per case with the median of each and the ratio bounded/plain.
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
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
