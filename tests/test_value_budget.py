"""J006 and J008: which schema strings and arrays can run past the token budget (sgcli/lint/value_budget.py)."""

from __future__ import annotations

import json

import pytest

from sgcli.constraints.jsonpos import SchemaText
from sgcli.lint.value_budget import value_budget


def _flagged(schema, budget: int = 256, code: str = "J006") -> list[str]:
    text = json.dumps(schema, indent=1)
    found = value_budget(schema, SchemaText(text), "s.json", budget)
    return [d.message.split(" ")[3] for d in found if d.code == code]


@pytest.mark.parametrize(
    "node",
    [
        {"type": "string", "maxLength": 60},
        {"type": "string", "enum": ["a", "b"]},
        {"type": "string", "const": "x"},
        {"type": "string", "format": "date-time"},
        {"type": "string", "pattern": "^[a-z]{1,8}(-[0-9]{2})?$"},
        {"type": "string", "pattern": "^(?!aws:).{1,128}$"},  # a look-ahead is zero width (CloudFormation's tags)
        {"type": "integer"},
    ],
)
def test_bounded_strings_and_other_types_pass(node):
    assert _flagged({"type": "object", "properties": {"x": node}}) == []


@pytest.mark.parametrize(
    "node",
    [
        {"type": "string"},
        {"type": ["string", "null"]},
        {"type": "string", "format": "email"},  # any length
        {"type": "string", "pattern": "[a-z]{1,8}"},  # a search: more text may surround it
        {"type": "string", "pattern": "^[a-z]+$"},
        {"type": "string", "pattern": "^(a{1,3}$"},  # unreadable: not counted as a bound
        {"type": "string", "pattern": "^(a{1,3})\\1$"},  # a backreference: not counted either
    ],
)
def test_unbounded_strings_are_named_at_their_pointer(node):
    assert _flagged({"type": "object", "properties": {"x": node}}) == ["/properties/x"]


def test_a_bound_costing_more_than_the_budget_is_flagged_and_one_within_it_is_not():
    schema = {"type": "object", "properties": {"essay": {"type": "string", "maxLength": 3000}}}
    (diagnostic,) = value_budget(schema, SchemaText(json.dumps(schema)), "s.json", 256)
    assert "~1000 tokens" in diagnostic.message and "budget of 256" in diagnostic.message
    assert _flagged(schema, budget=2000) == []


def test_conditions_and_negations_are_not_generated_values():
    schema = {"if": {"type": "string"}, "then": {"type": "string", "maxLength": 5}, "not": {"type": "string"}}
    assert _flagged(schema) == []
    named = {"type": "object", "properties": {"not": {"type": "string"}, "if": {"type": "string"}}}
    assert _flagged(named) == ["/properties/not", "/properties/if"]  # properties of those names are values


def test_xgrammar_admits_no_escape_in_a_string_with_max_length_as_j006_says(run_cli, tmp_path):
    """The caveat J006's explanation gives: if xgrammar learns escapes in bounded strings, this fails and
    the explanation (and docs/lint.md) should lose it."""
    (tmp_path / "s.json").write_text('{"type": "string", "maxLength": 10}')
    (tmp_path / "s.test.yaml").write_text(
        'grammar: s.json\ncases:\n  - {input: \'"a\\"b"\', accept: true, description: an escaped quote}\n'
    )
    result = run_cli("test", str(tmp_path / "s.test.yaml"), "-b", "llguidance", "-b", "xgrammar")
    output = result.stdout + result.stderr
    assert result.exit_code == 1 and "case 1 failed on xgrammar" in output and "failed on llguidance" not in output


def test_a_pattern_bounds_by_its_longest_match_and_the_tighter_bound_counts():
    long_pattern = {"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-Z]{1,900}-[0-9]{3}$"}}}
    (diagnostic,) = value_budget(long_pattern, SchemaText(json.dumps(long_pattern)), "s.json", 256)
    assert "its pattern allows 904 characters" in diagnostic.message and "~302 tokens" in diagnostic.message
    both = {"type": "string", "pattern": "^[a-z]{1,900}$", "maxLength": 30}
    assert _flagged(both) == []


ITEM = {"type": "object", "properties": {"quantity": {"type": "integer"}, "unit_price": {"type": "number"}}}


@pytest.mark.parametrize(
    "node",
    [
        {"type": "array", "items": ITEM, "maxItems": 5},
        {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}], "items": False},
        {"type": "array", "items": False},  # only the empty array
        {"type": "array", "items": [{"type": "number"}], "additionalItems": False},  # draft 4-2019-09's tuple
        {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},  # closed as well
        {"type": "array", "items": {"type": "integer"}, "maxItems": 128},  # 255 tokens at the least: within 256
        {"type": "array", "enum": [[1], [1, 2]]},
        {"type": "array", "const": [1, 2]},
        {"type": "object"},
    ],
)
def test_bounded_arrays_and_other_types_pass(node):
    assert _flagged({"type": "object", "properties": {"x": node}}, code="J008") == []


@pytest.mark.parametrize(
    "node",
    [
        {"type": "array", "items": ITEM},  # the invoice that ran to --max-tokens
        {"type": ["array", "null"]},
        {"type": "array", "prefixItems": [{"type": "number"}]},  # an open tuple: more items may follow
        {"type": "array", "items": [{"type": "number"}]},  # a draft-07 tuple without additionalItems: false
        {"type": "array", "prefixItems": [{"type": "integer"}], "contains": {}, "unevaluatedItems": False},
        {"type": "array", "items": {"type": "integer"}, "unevaluatedItems": False},  # items evaluates them all
    ],
)
def test_unbounded_arrays_are_named_at_their_pointer_with_the_budget(node):
    schema = {"type": "object", "properties": {"x": node}}
    assert _flagged(schema, code="J008") == ["/properties/x"]
    text = json.dumps(schema)
    (diagnostic,) = [d for d in value_budget(schema, SchemaText(text), "s.json", 99) if d.code == "J008"]
    assert diagnostic.severity == "warning" and "--max-tokens (99) is invalid" in diagnostic.message
    assert (diagnostic.line, diagnostic.col) == (1, text.index('"x": {"type"') + 7)  # at x's "type", as J006


def test_a_max_items_costing_more_than_the_budget_is_flagged_and_one_within_it_is_not():
    schema = {
        "type": "object",
        "properties": {"ids": {"type": "array", "items": {"type": "integer"}, "maxItems": 100000}},
    }
    (diagnostic,) = value_budget(schema, SchemaText(json.dumps(schema)), "s.json", 256)
    assert diagnostic.code == "J008" and diagnostic.message.split(" ")[3] == "/properties/ids"
    assert "~199999 tokens (maxItems 100000" in diagnostic.message and "budget of 256" in diagnostic.message
    assert "lower maxItems to at most 32" in diagnostic.hint
    assert _flagged(schema, budget=200000, code="J008") == []
    infinite = {"type": "array", "maxItems": float("inf")}  # Python's json reads `Infinity`: no bound
    assert _flagged(infinite, code="J008") == ["/"]


def test_one_walk_finds_strings_and_arrays_and_skips_conditions():
    line = {"type": "object", "properties": {"d": {"type": "string"}}}
    schema = {
        "type": "object",
        "properties": {"lines": {"type": "array", "items": line}},
        "if": {"type": "array"},
        "not": {"type": "array"},
    }
    found = value_budget(schema, SchemaText(json.dumps(schema, indent=1)), "s.json", 256)
    assert [(d.code, d.message.split(" ")[3]) for d in found] == [
        ("J008", "/properties/lines"),
        ("J006", "/properties/lines/items/properties/d"),
    ]
