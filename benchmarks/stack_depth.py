"""How much stack a grammar library's compile needs per byte of constraint: the measurement behind
`sgcli.backends.bounded.STACK_PER_BYTE`.

The libraries compile recursively, one native frame (or several) per level of nesting, and nesting
costs few bytes: a chain of `$ref`s through `items` is 33 bytes a level, and llguidance overflowed an
8 MiB stack (a segfault: the process is gone) at 35 KB of it. For each shape below this finds, by
bisection, the longest chain that compiles on a thread with `--stack` MiB of stack, each attempt in a
fresh process, and prints the stack bytes per constraint byte at the first crash. sgcli gives every
in-process compile STACK_PER_BYTE stack bytes per byte of its text; the most any shape needed is the
figure to keep a margin over. A shape the library refuses (an error, a limit of its own) or that runs
past `--timeout` has no crash to measure.

    python benchmarks/stack_depth.py --backend llguidance [--stack 8] [--shapes items,props]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time


def _json_chain(link: str):
    """Level i holds `link` with the next level's reference; the last level is an integer."""

    def build(n: int) -> tuple[str, str]:
        parts = [f'"{i}":' + link.replace("NEXT", f'"#/{i + 1}"') for i in range(n)]
        return "json_schema", '{"$ref":"#/0",' + ",".join(parts) + f',"{n}":{{"type":"integer"}}}}'

    return build


def _rule_chain(kind: str, head: str, body: str):
    def build(n: int) -> tuple[str, str]:
        rules = "".join(f"r{i}{body.replace('NEXT', f'r{i + 1}')}\n" for i in range(n))
        sep = " ::= " if kind == "ebnf" else ": "
        return kind, f'{head}{sep}r0\n{rules}r{n}{sep}"b"\n'

    return build


SHAPES = {
    "items": _json_chain('{"items":{"$ref":NEXT}}'),
    "ref": _json_chain('{"$ref":NEXT}'),
    "anyof": _json_chain('{"anyOf":[{"$ref":NEXT}]}'),
    "anyof_null": _json_chain('{"anyOf":[{"$ref":NEXT},{"type":"null"}]}'),
    "allof": _json_chain('{"allOf":[{"$ref":NEXT}]}'),
    "oneof": _json_chain('{"oneOf":[{"$ref":NEXT},{"type":"null"}]}'),
    "props": _json_chain('{"properties":{"a":{"$ref":NEXT}}}'),
    "additional": _json_chain('{"additionalProperties":{"$ref":NEXT}}'),
    "prefix": _json_chain('{"prefixItems":[{"$ref":NEXT}]}'),
    "gbnf_right": _rule_chain("ebnf", "root", ' ::= "a" NEXT'),
    "gbnf_left": _rule_chain("ebnf", "root", ' ::= NEXT "a"'),
    "gbnf_nested": _rule_chain("ebnf", "root", ' ::= "(" NEXT ")"'),
    "lark_right": _rule_chain("lark", "start", ': "a" NEXT'),
    "lark_nested": _rule_chain("lark", "start", ': "(" NEXT ")"'),
}


def _child(shape: str, n: int, backend_name: str, stack: int) -> None:
    from sgcli.backends import get_backend
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.tokenizers import load_tokenizer

    kind, text = SHAPES[shape](n)
    vocab = load_tokenizer(None).vocab
    backend = get_backend(backend_name)
    backend.prepare(vocab)
    out: dict = {"bytes": len(text)}

    def run() -> None:
        t = time.perf_counter()
        try:
            backend.compile(ConstraintSpec(Kind(kind), text), vocab)
            out["result"] = "ok"
        except Exception as exc:  # noqa: BLE001 - a refusal is a result here
            out["result"] = "refused: " + str(exc)[:80].replace("\n", " ")
        out["s"] = round(time.perf_counter() - t, 2)

    threading.stack_size(stack)
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    print(json.dumps(out))


def _attempt(shape: str, n: int, backend: str, stack: int, timeout: float) -> str:
    """ok, crash, refused or timeout."""
    cmd = [sys.executable, __file__, "--child", shape, str(n), backend, str(stack)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout"
    if done.returncode < 0:
        return "crash"
    if done.returncode > 0:
        raise SystemExit(f"{shape} at {n}: the child failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["result"].split(":")[0]


def measure(shape: str, backend: str, stack: int, timeout: float, most: int) -> dict:
    lo, hi, n, last = 0, None, 250, ""
    while hi is None or hi - lo > max(lo // 10, 10):
        last = _attempt(shape, n, backend, stack, timeout)
        if last == "crash":
            hi = n
        elif last == "ok":
            lo = n
        else:
            break
        n = n * 2 if hi is None else (lo + hi) // 2
        if n > most:
            break
    size = (lambda k: len(SHAPES[shape](k)[1])) if lo or hi else None
    return {
        "shape": shape,
        "compiled_levels": lo,
        "compiled_bytes": size(lo) if lo else 0,
        "crashed_levels": hi,
        "crashed_bytes": size(hi) if hi else None,
        "stack_per_byte": round(stack / size(hi)) if hi else None,
        "stopped_by": None if hi else last or "the level cap",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="llguidance")
    parser.add_argument("--stack", type=int, default=8, help="MiB of stack for the compile thread")
    parser.add_argument("--shapes", help="comma-separated, default all: " + ",".join(SHAPES))
    parser.add_argument("--timeout", type=float, default=40.0, help="seconds per attempt")
    parser.add_argument("--most", type=int, default=64000, help="levels tried at most")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        shape, n, backend, stack = args.child
        _child(shape, int(n), backend, int(stack))
        return
    worst = 0
    for shape in args.shapes.split(",") if args.shapes else SHAPES:
        row = measure(shape, args.backend, args.stack << 20, args.timeout, args.most)
        worst = max(worst, row["stack_per_byte"] or 0)
        print(json.dumps({"backend": args.backend, **row}), flush=True)
    print(f"{args.backend}: at most {worst} stack bytes per constraint byte over the shapes measured")


if __name__ == "__main__":
    main()
