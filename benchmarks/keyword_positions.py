"""Which JSON Schema keywords each backend enforces, and where: one keyword, many positions.

Every leaf below is a schema whose only violated keyword, for its invalid instances, is the
one it is named after (checked with jsonschema: the instance is invalid, and valid once that
keyword is deleted). Each leaf is placed at every position of POSITIONS (the root, a property,
an array item, behind `$ref`, inside `allOf`/`anyOf`/`oneOf`/`if`-`then`-`else`/`not`/
`dependentSchemas`/`patternProperties`, beside `anyOf`, ...), its instances wrapped to match.
The cases are written to tests/conformance/keyword_positions.json (suite format, plus
`keyword` and `position`), where the soundness benchmarks and tests read them.

Measured per backend (lint's 256-byte vocabulary, `json.dumps` forms): for each keyword and
position, whether the bare backend's matcher rejects every invalid instance (`enforced`),
accepts one (`leaks`), or does not compile the schema (`refused`). The per-backend tables in
sgcli/backends/keyword_coverage.py are read off these figures.

    .venv/bin/python benchmarks/keyword_positions.py --write     # regenerate the corpus file
    .venv/bin/python benchmarks/keyword_positions.py --measure   # the matrix, per backend, to benchmarks/results/
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "conformance" / "keyword_positions.json"
RESULTS = ROOT / "benchmarks" / "results" / "keyword_positions.json"
COMPILE_TIMEOUT_S = 10.0

# (keyword, leaf schema, valid instance, invalid instances): each invalid one breaks `keyword` alone
LEAVES = [
    ("type", {"type": "integer"}, 3, ["x", 1.5, None]),
    ("type", {"type": "string"}, "x", [1, None, {}]),
    ("enum", {"type": "string", "enum": ["red", "green"]}, "red", ["blue", "re"]),
    ("enum", {"enum": [1, "one"]}, 1, [2, "two"]),
    ("const", {"type": "string", "const": "ok"}, "ok", ["no", "o"]),
    ("pattern", {"type": "string", "pattern": "^a+b$"}, "aab", ["ba", "aa"]),
    ("minLength", {"type": "string", "minLength": 3}, "abc", ["ab"]),
    ("maxLength", {"type": "string", "maxLength": 2}, "ab", ["abc"]),
    ("minimum", {"type": "integer", "minimum": 5}, 5, [4, -3]),
    ("maximum", {"type": "integer", "maximum": 5}, 5, [6, 50]),
    ("minimum", {"type": "number", "minimum": 1.5}, 2, [1.25]),
    ("exclusiveMinimum", {"type": "integer", "exclusiveMinimum": 5}, 6, [5]),
    ("exclusiveMaximum", {"type": "integer", "exclusiveMaximum": 5}, 4, [5]),
    ("multipleOf", {"type": "integer", "multipleOf": 3}, 6, [7]),
    # found on Snowplow's schemas: xgrammar drops these, saying so only in a compile warning
    ("multipleOf", {"type": "number", "multipleOf": 0.5}, 1.5, [1.25]),
    ("multipleOf", {"type": "integer", "minimum": 0, "multipleOf": 5}, 10, [7]),
    ("maxLength", {"type": "string", "format": "email", "maxLength": 8}, "a@b.com", ["abc@example.com"]),
    ("minLength", {"type": "string", "format": "email", "minLength": 6}, "ab@c.de", ["a@b.c"]),
    ("minItems", {"type": "array", "items": {"type": "integer"}, "minItems": 2}, [1, 2], [[1]]),
    ("maxItems", {"type": "array", "items": {"type": "integer"}, "maxItems": 1}, [1], [[1, 2]]),
    ("uniqueItems", {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, [1, 2], [[1, 1]]),
    ("contains", {"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}}, [1], [[2]]),
    ("items", {"type": "array", "items": {"type": "integer"}}, [1], [["x"]]),
    ("prefixItems", {"type": "array", "prefixItems": [{"type": "integer"}]}, [1], [["x"]]),
    (
        "required",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        {"a": 1},
        [{}],
    ),
    (
        "additionalProperties",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
        {"a": 1},
        [{"a": 1, "b": 2}],
    ),
    (
        "additionalProperties",
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"k": 1},
        [{"k": "x"}],
    ),
    ("properties", {"type": "object", "properties": {"a": {"type": "integer"}}}, {"a": 1}, [{"a": "x"}]),
    ("minProperties", {"type": "object", "minProperties": 1}, {"a": 1}, [{}]),
    ("maxProperties", {"type": "object", "maxProperties": 1}, {"a": 1}, [{"a": 1, "b": 2}]),
    (
        "dependentRequired",
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        {"a": 1, "b": 2},
        [{"a": 1}],
    ),
    (
        "patternProperties",
        {"type": "object", "patternProperties": {"^p": {"type": "integer"}}},
        {"p": 1},
        [{"p": "x"}],
    ),
    ("propertyNames", {"type": "object", "propertyNames": {"maxLength": 2}}, {"ab": 1}, [{"abc": 1}]),
    (
        "unevaluatedProperties",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "unevaluatedProperties": False},
        {"a": 1},
        [{"a": 1, "b": 2}],
    ),
    ("unevaluatedItems", {"type": "array", "prefixItems": [{}], "unevaluatedItems": False}, [1], [[1, 2]]),
    ("format", {"type": "string", "format": "date"}, "2024-01-31", ["2024-13-45", "x"]),
    ("format", {"type": "string", "format": "ipv4"}, "10.0.0.1", ["999.1.1.1"]),
    # the same keywords without `type` (a backend may apply them only beside their type)
    ("pattern", {"pattern": "^a+b$"}, "aab", ["ba"]),
    ("minLength", {"minLength": 3}, "abc", ["ab"]),
    ("maxLength", {"maxLength": 2}, "ab", ["abc"]),
    ("minimum", {"minimum": 5}, 5, [4]),
    ("maximum", {"maximum": 5}, 5, [6]),
    ("multipleOf", {"multipleOf": 3}, 6, [7]),
    ("minItems", {"minItems": 2}, [1, 2], [[1]]),
    ("maxItems", {"maxItems": 1}, [1], [[1, 2]]),
    ("items", {"items": {"type": "integer"}}, [1], [["x"]]),
    ("required", {"required": ["a"]}, {"a": 1}, [{}]),
    ("properties", {"properties": {"a": {"type": "integer"}}}, {"a": 1}, [{"a": "x"}]),
    ("additionalProperties", {"properties": {"a": {}}, "additionalProperties": False}, {"a": 1}, [{"a": 1, "b": 2}]),
    ("maxProperties", {"maxProperties": 1}, {"a": 1}, [{"a": 1, "b": 2}]),
    ("minProperties", {"minProperties": 1}, {"a": 1}, [{}]),
    ("enum", {"enum": ["red", "green"]}, "red", ["blue"]),
    ("const", {"const": 2}, 2, [3]),
    ("format", {"format": "date"}, "2024-01-31", ["2024-13-45"]),
    ("not", {"type": "integer", "not": {"const": 3}}, 4, [3]),
    ("oneOf", {"oneOf": [{"type": "integer"}, {"minimum": 2}]}, 1, [3]),
    ("anyOf", {"anyOf": [{"type": "integer"}, {"type": "null"}]}, 1, ["x"]),
    ("allOf", {"allOf": [{"type": "integer"}, {"minimum": 2}]}, 3, [1]),
    ("if", {"if": {"type": "integer"}, "then": {"minimum": 2}}, 3, [1]),
    ("else", {"if": {"type": "integer"}, "else": {"type": "string"}}, "x", [None]),
    (
        "dependentSchemas",
        {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
        {"a": 1, "b": 2},
        [{"a": 1}],
    ),
]


# every JSON type but boolean: a wrapper's second branch or condition that no leaf instance meets or breaks
_NOT_BOOLEAN = {"type": ["null", "integer", "number", "string", "array", "object"]}

# name -> (schema around the leaf S, instance around a leaf value x)
POSITIONS = {
    "root": lambda s: (s, lambda x: x),
    "property": lambda s: (
        {"type": "object", "properties": {"a": s}, "required": ["a"]},
        lambda x: {"a": x},
    ),
    "nested property": lambda s: (
        {
            "type": "object",
            "properties": {"o": {"type": "object", "properties": {"a": s}, "required": ["a"]}},
            "required": ["o"],
        },
        lambda x: {"o": {"a": x}},
    ),
    "items": lambda s: ({"type": "array", "items": s, "minItems": 1}, lambda x: [x]),
    "prefixItems": lambda s: ({"type": "array", "prefixItems": [s], "minItems": 1}, lambda x: [x]),
    "additionalProperties": lambda s: (
        {"type": "object", "additionalProperties": s, "minProperties": 1},
        lambda x: {"k": x},
    ),
    "$ref": lambda s: ({"$defs": {"d": s}, "$ref": "#/$defs/d"}, lambda x: x),
    "$ref property": lambda s: (
        {"type": "object", "$defs": {"d": s}, "properties": {"a": {"$ref": "#/$defs/d"}}, "required": ["a"]},
        lambda x: {"a": x},
    ),
    "definitions $ref": lambda s: (
        {
            "definitions": {"d": s},
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/d"}},
            "required": ["a"],
        },
        lambda x: {"a": x},
    ),
    "allOf": lambda s: ({"allOf": [s]}, lambda x: x),
    "allOf of two": lambda s: ({"allOf": [s, _NOT_BOOLEAN]}, lambda x: x),
    "anyOf branch": lambda s: ({"anyOf": [s, {"type": "boolean"}]}, lambda x: x),
    "oneOf branch": lambda s: ({"oneOf": [s, {"type": "boolean"}]}, lambda x: x),
    "beside anyOf": lambda s: ({**s, "anyOf": [_NOT_BOOLEAN, {"type": "boolean"}]}, lambda x: x),
    "then": lambda s: ({"if": _NOT_BOOLEAN, "then": s}, lambda x: x),
    "else": lambda s: ({"if": {"type": "boolean"}, "else": s}, lambda x: x),
    "not not": lambda s: ({"not": {"not": s}}, lambda x: x),
    "dependentSchemas": lambda s: (
        {
            "type": "object",
            "properties": {"t": {"type": "integer"}},
            "required": ["t"],
            "dependentSchemas": {"t": {"properties": {"a": s}, "required": ["a"]}},
        },
        lambda x: {"t": 1, "a": x},
    ),
    "patternProperties": lambda s: (
        {"type": "object", "patternProperties": {"^a": s}, "minProperties": 1},
        lambda x: {"a": x},
    ),
    "anyOf property": lambda s: (
        {"type": "object", "properties": {"a": {"anyOf": [s, {"type": "boolean"}]}}, "required": ["a"]},
        lambda x: {"a": x},
    ),
}


def _without(schema: dict, keyword: str) -> dict:
    out = copy.deepcopy(schema)
    out.pop(keyword, None)
    if keyword == "if":
        out.pop("then", None)
    return out


def cases() -> list[dict]:
    """Every leaf at every position, instances checked by jsonschema (invalid ones: the keyword alone)."""
    from sgcli.lint.schema_instances import validator

    out = []
    for keyword, leaf, good, bads in LEAVES:
        relaxed = validator(_without(leaf, keyword))
        assert validator(leaf).is_valid(good), (keyword, leaf)
        for bad in bads:
            assert not validator(leaf).is_valid(bad) and relaxed.is_valid(bad), (keyword, leaf, bad)
        for position, place in POSITIONS.items():
            schema, wrap = place(copy.deepcopy(leaf))
            check = validator(schema)
            tests = [{"description": f"valid: {json.dumps(good)}", "data": wrap(good), "valid": True}]
            tests += [{"description": f"invalid: {json.dumps(b)}", "data": wrap(b), "valid": False} for b in bads]
            if not all(check.is_valid(t["data"]) == t["valid"] for t in tests):
                continue  # the wrapper changes the verdict (e.g. a boolean branch): not this position
            out.append(
                {
                    "description": f"{keyword} at {position}: {json.dumps(leaf)}",
                    "keyword": keyword,
                    "position": position,
                    "schema": schema,
                    "tests": tests,
                }
            )
    return out


def measure(backends: list[str], progress=None) -> dict:
    """{backend: {keyword: {position: 'enforced' | 'leaks' | 'refused' | 'rejects valid'}}}."""
    from sgcli.backends import get_backend
    from sgcli.backends.bounded import CompileLimitError, compile_bounded
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.errors import UserError
    from sgcli.limits import Limits, set_limits
    from sgcli.lint.runner import byte_vocab
    from sgcli.lint.schema_checks import accepts

    set_limits(Limits(timeout_s=COMPILE_TIMEOUT_S))
    vocab = byte_vocab()
    out: dict = {}
    for name in backends:
        backend = get_backend(name)
        table = out.setdefault(name, {})
        for case in cases():
            spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(case["schema"]), case["description"])
            try:
                compiled = compile_bounded(backend, spec, vocab)
            except CompileLimitError:
                verdict = "timeout"
            except UserError:
                verdict = "refused"
            else:
                verdict = "enforced"
                for t in case["tests"]:
                    took = any(
                        accepts(compiled, json.dumps(t["data"], separators=s)) for s in ((", ", ": "), (",", ":"))
                    )
                    if took and not t["valid"]:
                        verdict = "leaks"
                        break
                    if not took and t["valid"] and verdict == "enforced":
                        verdict = "rejects valid"
            if progress:
                progress(f"{name} {case['description']}: {verdict}")
            cell = table.setdefault(case["keyword"], {})
            previous = cell.get(case["position"])
            cell[case["position"]] = verdict if previous in (None, verdict) else f"{previous}/{verdict}"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {CORPUS.relative_to(ROOT)}")
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--backends", default="llguidance,xgrammar,outlines_core")
    args = parser.parse_args()
    if args.write:
        found = cases()
        CORPUS.write_text(json.dumps(found, indent=1) + "\n")
        print(f"wrote {len(found)} cases to {CORPUS.relative_to(ROOT)}")
    if args.measure:
        matrix = measure(args.backends.split(","), lambda line: print(line, file=sys.stderr, flush=True))
        merged = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
        merged.update(matrix)  # a run over some backends keeps the others' committed results
        RESULTS.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")
        print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
