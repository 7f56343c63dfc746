"""Does each backend read a regex as its dialect means it? Real-world patterns, random walks, an
independent check.

Every `pattern` (and `patternProperties` key) in a folder of JSON Schemas becomes a `--regex`; each
backend compiles it (bounded, as sgcli does) and random walks of its matcher sample up to
`--samples` strings, each checked with the `regex` package in the backend's dialect
(`constraints/regex_dialects.py`: Rust for llguidance and outlines-core, ECMAScript for xgrammar). A
sample the check refuses is a misreading: the backend's grammar takes text the regex does not.
Exit 1 when there is any.

    python benchmarks/schema_store.py /tmp/ss           # the JSON Schema Store's schemas, offline
    python benchmarks/regex_readings.py /tmp/ss [--backends xgrammar] [--samples 12] [--json]

Found this way (2026-12-06, 942 patterns): xgrammar read `[\\^~]` as `[^~]`, `\\x41B` as U+041B,
`.` as any character, `[\\p{L}]` as letters and skipped anchors text can pass
(backends/xgrammar_regex.py); docs/grammar-development.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from sgcli.backends import get_backend
from sgcli.backends.bounded import compile_bounded
from sgcli.backends.matching import sample_strings
from sgcli.constraints import regex_dialects
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError
from sgcli.tokenizers import load_tokenizer

BACKENDS = ("llguidance", "xgrammar", "outlines_core")


def patterns_in(folder: Path) -> list[str]:
    """Each distinct `pattern` and `patternProperties` key in the folder's *.json files, in file order."""
    found: dict[str, None] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "pattern" and isinstance(value, str):
                    found.setdefault(value)
                elif key == "patternProperties" and isinstance(value, dict):
                    for p in value:
                        found.setdefault(p)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(folder.rglob("*.json")):
        try:
            walk(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, UnicodeDecodeError, RecursionError):
            continue
    return list(found)


def read_one(backend: str, pattern: str, vocab, samples: int, seconds: float) -> dict:
    """What `backend` makes of `pattern`: refused (and why), or its samples and which the check refuses."""
    t = time.perf_counter()
    try:
        compiled = compile_bounded(get_backend(backend), ConstraintSpec(Kind.REGEX, pattern, "p.regex"), vocab)
    except UserError as exc:
        return {"refused": exc.message[:160]}
    out = {"compile_ms": round((time.perf_counter() - t) * 1000, 2), "samples": 0, "misread": []}
    dialect = get_backend(backend).capabilities.regex_dialect
    for s in sample_strings(compiled, samples, seconds=seconds):
        text = s.decode("utf-8", "replace")
        try:
            ok = regex_dialects.fullmatch(pattern, text, dialect)
        except regex_dialects.DialectError as exc:
            out["unchecked"] = str(exc)[:120]  # the `regex` package cannot read it in that dialect
            break
        out["samples"] += 1
        if not ok:
            out["misread"].append(text)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="a folder of JSON Schemas (benchmarks/schema_store.py writes one)")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--samples", type=int, default=12, help="random walks kept per pattern and backend")
    ap.add_argument("--seconds", type=float, default=3.0, help="walking time per pattern and backend")
    ap.add_argument("--json", action="store_true", help="one JSON line per pattern, then the totals")
    args = ap.parse_args()
    names = [b for b in args.backends.split(",") if b]
    patterns = patterns_in(args.folder)
    vocab = load_tokenizer(None).vocab
    totals = {b: Counter() for b in names}
    for i, pattern in enumerate(patterns):
        row = {"pattern": pattern}
        for b in names:
            got = row[b] = read_one(b, pattern, vocab, args.samples, args.seconds)
            t = totals[b]
            t["refused" if "refused" in got else "compiled"] += 1
            t["samples"] += got.get("samples", 0)
            t["unchecked"] += "unchecked" in got
            t["misread patterns"] += bool(got.get("misread"))
            t["misread samples"] += len(got.get("misread", []))
            if got.get("misread") and not args.json:
                print(f"misread by {b}: {pattern!r}: {got['misread'][:2]}", file=sys.stderr)
        if args.json:
            print(json.dumps(row))
        elif (i + 1) % 100 == 0:
            print(f"{i + 1}/{len(patterns)} patterns", file=sys.stderr)
    summary = {"patterns": len(patterns), **{b: dict(t) for b, t in totals.items()}}
    print(json.dumps(summary) if args.json else json.dumps(summary, indent=1))
    return 1 if any(t["misread samples"] for t in totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
