"""The schema checker reads a property name as it is written: a key no name the schema allows can
start is masked at its first wrong character, not after the model has written it whole (a tiny random
model wrote 60 tokens of one key under `unevaluatedProperties: false`, then ran out of tokens)."""

from __future__ import annotations

import json

import pytest

from sgcli.backends import compile_for
from sgcli.backends.matching import feed
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.lint.runner import byte_vocab

UNEVALUATED = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"base": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}},
    "$ref": "#/$defs/base",
    "anyOf": [{"properties": {"b": {"type": "boolean"}}}, {"properties": {"cc": {"type": "string"}}}],
    "if": {"properties": {"a": {"const": 1}}},
    "then": {"properties": {"when": {"type": "null"}}},
    "dependentSchemas": {"b": {"properties": {"dep": {"type": "integer"}}}},
    "unevaluatedProperties": False,
}


def compiled(schema, backend):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json")
    return compile_for(backend, spec, byte_vocab())[0]


def refused_at(checked, text: str) -> int | None:
    """The byte offset where the matcher (mask and accept agreeing) refuses `text`; None if it takes it."""
    result = feed(checked, byte_vocab().encode(text), check_mask=True)
    assert not result.inconsistent, result.problem
    return None if result.accepted else result.taken


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_a_key_unevaluated_properties_rules_out_is_masked_at_its_first_wrong_character(backend):
    checked = compiled(UNEVALUATED, backend)
    assert refused_at(checked, '{"a": 1, "zzz": 1}') == 10  # the `z`, not the closing quote
    assert refused_at(checked, '{"a": 1, "ccx": "x"}') == 12
    assert refused_at(checked, '{"a": 1, "c": "x"}') == 11  # a prefix of "cc" is no name either
    for valid in ({"a": 1, "b": True, "cc": "x"}, {"a": 1, "when": None}, {"a": 2, "b": False, "dep": 3}):
        assert refused_at(checked, json.dumps(valid)) is None, valid


@pytest.mark.parametrize(
    "opener",
    [
        {"patternProperties": {"^x": {}}},
        {"additionalProperties": {"type": "integer"}},
        {"unevaluatedProperties": {"type": "integer"}},
        {"$ref": "https://example.com/elsewhere.json"},
    ],
    ids=["patternProperties", "additionalProperties", "nested unevaluatedProperties", "outside ref"],
)
def test_a_branch_that_may_evaluate_any_name_leaves_keys_to_the_whole_check(opener):
    from sgcli.backends.schema_plan import CheckPlan

    schema = {**UNEVALUATED, "anyOf": [*UNEVALUATED["anyOf"], opener]}
    plan = CheckPlan(schema, [""], byte_vocab())
    assert plan.key_rules(("",)) is None


def test_property_names_and_closed_objects_check_keys_as_prefixes():
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 4}},
            "fixed": {
                "type": "object",
                "properties": {"north": {"type": "integer"}, "south": {"type": "integer"}},
                "additionalProperties": False,
            },
        },
    }
    checked = compiled(schema, "outlines_core")  # leaves propertyNames to the checker
    assert refused_at(checked, '{"tags": {"ab1": 1}}') == 13
    assert refused_at(checked, '{"tags": {"abcde": 1}}') == 15
    assert refused_at(checked, '{"tags": {"abcd": 1}, "fixed": {"north": 1}}') is None


def test_a_repeated_key_is_refused_by_the_checker_and_never_judged_valid():
    """`{"b": 1, "b": "x"}` was judged valid on its last value; readers that keep the first see 1."""
    from sgcli.validation.verdict import json_verdict

    schema = {"type": "object", "properties": {"l": {"type": "array", "uniqueItems": True}}}
    checked = compiled(schema, "llguidance")  # leaves uniqueItems to the checker, which reads every key
    assert refused_at(checked, '{"b": 1, "b": "x"}') == 11  # the closing quote of the second "b"
    assert refused_at(checked, '{"b": 1, "c": "x"}') is None
    verdict = json_verdict({"type": "object"}, '{"b": 1, "c": {"d": 1, "d": 2}}')
    assert verdict.errors and "'d' appears twice" in verdict.errors[0]
    assert json_verdict({"type": "object"}, '{"b": 1, "c": {"d": 1}}').errors == []


def test_contains_counts_are_judged_as_items_complete():
    """`[8,9,8,4,8,5` under minContains 2 and maxItems 6 took every place, then had no way to end:
    the random model's outputs all ended in a dead end after backtracking gave up."""
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 9},
        "contains": {"const": 3},
        "minContains": 2,
        "maxContains": 3,
        "maxItems": 6,
    }
    for backend in ("llguidance", "xgrammar"):
        checked = compiled(schema, backend)
        assert refused_at(checked, "[8,9,8,4,8,5]") == 10  # the fifth item leaves one place for two matches
        assert refused_at(checked, "[3,3,3,3]") == 8  # a fourth match
        for valid in ([3, 9, 8, 4, 8, 3], [3, 3], [1, 3, 3, 3, 0, 0]):
            assert refused_at(checked, json.dumps(valid, separators=(",", ":"))) is None, valid
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **{k: schema[k] for k in ("type", "items")}}
    draft7.update(contains={"const": 3}, maxItems=2, minContains=5)  # minContains is no draft-7 keyword
    assert refused_at(compiled(draft7, "xgrammar"), "[3,1]") is None
    assert refused_at(compiled(draft7, "xgrammar"), "[1,1]") == 4


def test_keywords_a_draft_does_not_read_are_not_checked():
    """Up to draft 7 a `$ref` overrides its siblings, so `enum` beside it in `propertyNames` names no key;
    draft 4 has no `contains`: both were refused as prefixes or counts (review, 2026-12-06)."""
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"n": {"type": "string"}},
        "propertyNames": {"$ref": "#/definitions/n", "enum": ["x"]},
        "properties": {"l": {"type": "array", "uniqueItems": True}},
    }
    assert refused_at(compiled(draft7, "llguidance"), '{"y": 1}') is None
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "array",
        "contains": {"enum": [5]},
        "maxItems": 2,
        "uniqueItems": True,
    }
    assert refused_at(compiled(draft4, "xgrammar"), "[1,2]") is None


def test_a_failed_backend_matcher_stays_failed_under_the_checker():
    """The checker filtered a failed llguidance matcher's one end token away: the empty mask then read as
    the checker's dead end, and masks/test called the text rejected (review, 2026-12-06)."""
    import numpy as np

    from sgcli.backends.base import new_bitmask
    from sgcli.backends.matching import first_mask_error

    schema = {"type": "object", "properties": {"l": {"type": "array", "uniqueItems": True}}}
    checked = compiled(schema, "llguidance")

    class Failed:
        error = "parser error: Too many items (limit 50000; mask)"

        def fill_mask(self, bitmask):
            bitmask[:] = 0
            bitmask[0] = 1 << 2  # the end token

        def can_stop(self):
            return False

    matcher = checked.matcher()
    matcher._inner = Failed()
    mask = new_bitmask(len(checked.vocab))
    matcher.fill_mask(mask)
    assert np.count_nonzero(mask) and matcher.error == Failed.error
    checked.matcher = lambda: matcher
    assert first_mask_error(checked) == Failed.error


OPEN = {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": True}


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])  # outlines-core closes objects (guarantee.md)
@pytest.mark.parametrize(
    "text, where",
    [
        ('{"x":1,"x":2}', 9),  # the quote closing the second "x"
        ('{"x":1,"yy":2,"yy":3}', 17),
        ('{"x":1,"a":{"b":1,"b":2}}', 20),  # in an inner object too
        ('{"x":1,"a":{"x":1},"b":[{"x":1}]}', None),  # the same key in other objects is no repeat
    ],
)
def test_a_repeated_key_is_masked_where_no_checker_runs(backend, text, where):
    """Every backend's grammar lets a key repeat in an object open to unlisted names, and with no keyword
    left to sgcli's checker nothing masked it: a random model wrote `{"x8":811,"x8":80134...}` (finish
    `stop`, `valid: false`). The guard refuses the token that closes the repeated key."""
    from sgcli.backends.repeated_keys import KeyGuardCompiled

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(OPEN), "s.json").for_generation()
    guarded = compile_for(backend, spec, byte_vocab())[0]
    assert isinstance(guarded, KeyGuardCompiled)  # no gap: the light guard, not the checker
    assert refused_at(guarded, text) == where


PATTERNED = {
    "type": "object",
    "properties": {"id": {"type": "integer"}},
    "patternProperties": {"^x[01]$": {"type": "integer", "minimum": 0, "maximum": 9}},
    "additionalProperties": False,
}


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
@pytest.mark.parametrize(
    "text, where",
    [
        ('{"{gen', 2),  # no name allowed starts with `{`
        ('{"x2', 3),
        ('{"x0":1,"xz', 10),  # nor `xz` (only `id`, `x0`, `x1`)
        ('{"id":1,"x0":2}', None),  # (both grammars write a listed name before the patterned ones)
        ('{"x1":1,"x0":2}', None),
    ],
)
def test_a_name_no_pattern_or_listed_name_can_start_is_masked_at_its_first_wrong_character(backend, text, where):
    """Under `patternProperties` and `additionalProperties: false`, xgrammar's grammar left keys free and the
    checker refused a key only once it was complete: a random model wrote `{"{generational Learn ...` until
    --max-tokens in 12 of 12 runs. A key is now checked against the names and anchored patterns as written."""
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PATTERNED), "s.json").for_generation()
    assert refused_at(compile_for(backend, spec, byte_vocab())[0], text) == where
