"""J006: which schema strings can run past the token budget (sgcli/lint/string_budget.py)."""

from __future__ import annotations

import json

import pytest

from sgcli.constraints.jsonpos import SchemaText
from sgcli.lint.string_budget import string_budget


def _flagged(schema, budget: int = 256) -> list[str]:
    text = json.dumps(schema, indent=1)
    return [d.message.split(" ")[3] for d in string_budget(schema, SchemaText(text), "s.json", budget)]


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
    (diagnostic,) = string_budget(schema, SchemaText(json.dumps(schema)), "s.json", 256)
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
    (diagnostic,) = string_budget(long_pattern, SchemaText(json.dumps(long_pattern)), "s.json", 256)
    assert "its pattern allows 904 characters" in diagnostic.message and "~302 tokens" in diagnostic.message
    both = {"type": "string", "pattern": "^[a-z]{1,900}$", "maxLength": 30}
    assert _flagged(both) == []
