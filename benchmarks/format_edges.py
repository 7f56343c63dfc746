"""Which `format`s each backend's grammar enforces exactly: random walks of its bare grammar for
`{"type": "string", "format": F}` and a list of edge values, each judged by jsonschema (with sgcli's
format checker, as "valid" is judged).

A format the grammar only approximates (it takes `2023-02-30` as a date, second 60 in a time,
`01.1.1.1` as an ipv4) must be declared in the backend's `approximate_formats`, so sgcli's schema
checker enforces it; a format whose grammar writes what is not JSON at all must not reach the
grammar (outlines-core's `email`, `uri`). Exit 1 when a format with a leak is declared exact.

    python benchmarks/format_edges.py [--walks 150] [--backends llguidance,xgrammar,outlines_core]
"""

from __future__ import annotations

import argparse
import json

from sgcli.backends import get_backend
from sgcli.backends.matching import feed, sample_strings
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError
from sgcli.lint.runner import byte_vocab
from sgcli.validation.verdict import schema_errors

EDGES = [
    *("2023-02-30", "2023-02-29", "2024-02-29", "2023-04-31", "0000-01-01", "2023-13-01"),
    *("2023-02-30T10:00:00Z", "2023-02-29T10:00:00Z", "2023-01-01T23:59:60Z", "2023-01-01T10:00:00+25:00"),
    *("23:59:60Z", "24:00:00Z", "10:00:00", "10:00:00+24:00"),
    *("01.1.1.1", "256.1.1.1", "1.1.1.1", "::4.01.76.5", "1::2::3", "::ffff:1.2.3.4"),
    *("a" * 64 + ".com", "-a.com", "a_b.com", "a@b", "a..b@c.d", "http://a b", "a:b", "../a", "#f", "P", "PT1.5S"),
]


def format_edges(backend_name: str, walks: int, seed: int = 3) -> list[dict]:
    """One row per format the backend's grammar knows: leaks (invalid values taken), texts that are
    not JSON, and whether the backend declares the format approximate."""
    backend = get_backend(backend_name)
    table = backend.capabilities.schema_keywords
    vocab = byte_vocab()
    rows = []
    for fmt in sorted(table.formats):
        schema = {"type": "string", "format": fmt}
        options = JsonOptions(whitespace="compact", for_generation=True)
        spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), f"format {fmt}", json_options=options)
        try:
            compiled = backend.compile(spec, vocab)
        except UserError as exc:
            rows.append({"backend": backend_name, "format": fmt, "error": exc.message})
            continue
        leaks, not_json = [], []
        for text in sample_strings(compiled, walks, seed=seed):
            try:
                value = json.loads(text)
            except ValueError:
                not_json.append(text.decode("utf-8", "backslashreplace"))
                continue
            if schema_errors(schema, value):
                leaks.append(value)
        edges = [v for v in EDGES if schema_errors(schema, v) and feed(compiled, vocab.encode(json.dumps(v))).accepted]
        rows.append(
            {
                "backend": backend_name,
                "format": fmt,
                "approximate": fmt in table.approximate_formats,
                "leaks": leaks[:5],
                "leak_count": len(leaks),
                "edges_taken": edges,
                "not_json": not_json[:3],
            }
        )
    return rows


def undeclared(row: dict) -> bool:
    """A format that lets an invalid value through but is declared exact."""
    return bool(row.get("leak_count") or row.get("edges_taken") or row.get("not_json")) and not row["approximate"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walks", type=int, default=150)
    parser.add_argument("--backends", default="llguidance,xgrammar,outlines_core")
    args = parser.parse_args()
    bad = 0
    for name in args.backends.split(","):
        for row in format_edges(name, args.walks):
            if "error" in row:
                print(f"{name:14} {row['format']:14} error: {row['error']}")
                continue
            flag = "UNDECLARED" if undeclared(row) else ("approximate" if row["approximate"] else "exact")
            bad += flag == "UNDECLARED"
            print(
                f"{name:14} {row['format']:14} {flag:11} leaks {row['leak_count']:3}/{args.walks} "
                f"edges {row['edges_taken']} not JSON {row['not_json']}"
            )
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
