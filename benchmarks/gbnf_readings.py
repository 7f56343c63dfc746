"""How llguidance reads GBNF: through its own converter (lexemes of literals and terminal-only rules)
or through sgcli's print (one-character lexemes, `dialects/convert.py: one_char_lexemes`), against
xgrammar, which reads GBNF as llama.cpp does.

For each grammar: random walks of xgrammar's matcher (up to `--samples`, within `--seconds`), how
many of them each llguidance reading accepts (as bytes: the language), and each reading's mask
time along the samples' own tokens (p50 and max, and xgrammar's). Exit 1 when sgcli's reading
refuses any xgrammar sample.

    python benchmarks/gbnf_readings.py [GRAMMAR_OR_FOLDER ...] [--samples 30] [--json]

With no path: $SGCLI_CORPORA/gbnf/grammars (llama.cpp's grammars). transformers-CFG's
`examples/grammars/**/*.ebnf` (a GitHub checkout) is the other corpus measured in
docs/grammar-development.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from corpus_paths import corpus, missing

from sgcli.backends import get_backend
from sgcli.backends.base import new_bitmask
from sgcli.backends.llguidance_backend import LLGuidanceCompiled
from sgcli.backends.matching import accepts_bytes, sample_strings
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError
from sgcli.tokenizers import load_tokenizer


def _own_reading(spec: ConstraintSpec, vocab, tok):
    """llguidance's own converter's reading, compiled as the backend compiles Lark."""
    import llguidance as llg
    from llguidance.gbnf_to_lark import gbnf_to_lark

    try:
        grammar = gbnf_to_lark(spec.text)
    except Exception as exc:  # its converter raises bare Exceptions too
        return None, f"its converter refuses it: {exc}"
    matcher = llg.LLMatcher(tok, grammar, log_level=0)
    if matcher.is_error():
        return None, matcher.get_error().splitlines()[0]
    return LLGuidanceCompiled("llguidance", spec, vocab, 0.0, [], grammar, prototype=matcher), None


def _mask_us(compiled, vocab, samples: list[bytes]) -> tuple[float | None, float | None]:
    """(p50, max) microseconds of the masks along each sample's canonical tokens."""
    times, mask = [], new_bitmask(len(vocab))
    for data in samples:
        matcher = compiled.matcher()
        for token in vocab.encode(data.decode("utf-8", "replace")):
            started = time.perf_counter()
            matcher.fill_mask(mask)
            times.append(time.perf_counter() - started)
            if not matcher.accept(token):
                break
    if not times:
        return None, None
    return round(statistics.median(times) * 1e6, 1), round(max(times) * 1e6, 1)


def measure(path: Path, vocab, samples: int, seconds: float) -> dict:
    spec = ConstraintSpec(Kind.EBNF, path.read_text(encoding="utf-8"), str(path))
    row: dict = {"grammar": path.name}
    try:
        xgrammar = get_backend("xgrammar").compile(spec, vocab)
        ours = get_backend("llguidance").compile(spec, vocab)
    except UserError as exc:
        return {**row, "error": exc.message}
    found = [s for s in sample_strings(xgrammar, samples, seed=1, seconds=seconds) if s.decode("utf-8", "replace")]
    own, own_error = _own_reading(spec, vocab, get_backend("llguidance").tokenizer(vocab))
    row["samples"] = len(found)
    row["sgcli_accepts"] = sum(accepts_bytes(ours, s).accepted for s in found)
    row["own_accepts"] = None if own is None else sum(accepts_bytes(own, s).accepted for s in found)
    if own_error:
        row["own_error"] = own_error
    row["mask_us_sgcli"] = _mask_us(ours, vocab, found)
    row["mask_us_own"] = None if own is None else _mask_us(own, vocab, found)
    row["mask_us_xgrammar"] = _mask_us(xgrammar, vocab, found)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=20.0, help="sampling budget per grammar")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    paths = args.paths
    if not paths:
        why = missing("gbnf")
        if why:
            print(why, file=sys.stderr)
            return 2
        paths = [corpus("gbnf") / "grammars"]
    files = sorted(f for p in paths for f in ([p] if p.is_file() else [*p.rglob("*.gbnf"), *p.rglob("*.ebnf")]))
    vocab = load_tokenizer(None).vocab
    rows = []
    for path in files:
        row = measure(path, vocab, args.samples, args.seconds)
        rows.append(row)
        if not args.json:
            print(
                f"{row['grammar']:28} "
                + (
                    f"error: {row['error'][:90]}"
                    if "error" in row
                    else f"n={row['samples']:2}  accepted: sgcli {row['sgcli_accepts']:2}, "
                    f"llguidance's converter {row['own_accepts'] if row['own_accepts'] is not None else '-':>2}  "
                    f"mask p50/max us: sgcli {row['mask_us_sgcli']}, converter {row['mask_us_own']}, "
                    f"xgrammar {row['mask_us_xgrammar']}"
                ),
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=1))
    return 1 if any(r.get("sgcli_accepts", 0) < r.get("samples", 0) for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
