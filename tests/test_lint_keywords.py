"""Lint's keyword probes (J001) per backend for the keywords xgrammar drops silently, each with a
negative case, J003 when no probe can run, and a refused keyword (J002) that hides nothing."""

from __future__ import annotations

import json

import pytest

from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.lint import Linter, LintOptions

COMPACT = JsonOptions(whitespace="compact")
IF_THEN_ELSE = {
    "type": "object",
    "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
    "required": ["kind", "n"],
    "if": {"properties": {"kind": {"const": "a"}}},
    "then": {"properties": {"n": {"minimum": 10}}},
    "else": {"properties": {"n": {"maximum": -10}}},
}
# name -> (schema, the keywords J001 must name for xgrammar)
POSITIVE = {
    "if/then/else": (IF_THEN_ELSE, {"then", "else"}),
    "uniqueItems": ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, {"uniqueItems"}),
    "pattern beside format": (
        {"type": "string", "format": "email", "pattern": "^[a-z]+@example\\.com$"},
        {"pattern"},
    ),
    "not": (
        {"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 3}}}, "required": ["a"]},
        {"not"},
    ),
}
# schemas where the keyword cannot be broken alone, or the backend enforces it: no J001
NEGATIVE = {
    "then without a way to break it": ({**IF_THEN_ELSE, "then": {"properties": {"n": {"type": "integer"}}}}, "then"),
    "uniqueItems with at most one item": ({"type": "array", "maxItems": 1, "uniqueItems": True}, "uniqueItems"),
    "pattern the format implies": ({"type": "string", "format": "date", "pattern": "^[0-9-]+$"}, "pattern"),
    "not of an impossible type": ({"type": "integer", "not": {"type": "string"}}, "not"),
}


def j001(schema, backend: str) -> set[str]:
    """Keywords the J001 probe found unenforced: its own findings, and those folded into the J004 of the
    same keyword (a named backend is the one generate would use: sgcli's checker takes the keyword over)."""
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, indent=2), "s.json", json_options=COMPACT)
    found = Linter(LintOptions(backend=backend, json_options=COMPACT)).lint_spec(spec).diagnostics
    verified = [d for d in found if d.code == "J001" or any(n.startswith("J001: ") for n in d.notes)]
    return {d.message.split("`")[1] for d in verified}, found


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_xgrammar_drops_are_named_by_keyword(name):
    schema, keywords = POSITIVE[name]
    named, _ = j001(schema, "xgrammar")
    assert keywords <= named


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_no_j001_where_the_keyword_cannot_be_broken_alone(name):
    schema, keyword = NEGATIVE[name]
    named, _ = j001(schema, "xgrammar")
    assert keyword not in named


def test_pattern_properties_per_backend():
    schema = {"type": "object", "patternProperties": {"^x_": {"type": "integer"}}}
    assert "patternProperties" in j001(schema, "outlines_core")[0]
    assert "patternProperties" not in j001(schema, "llguidance")[0]  # llguidance enforces it


def test_unprobed_schema_is_a_finding_not_a_note():
    _, found = j001({"type": "string", "format": "date", "pattern": "^x"}, "xgrammar")
    # xgrammar leaves pattern beside format to sgcli's checker (J004, declared); the probes could not run
    assert [d.code for d in found] == ["J003", "J004", "J004"]
    _, fine = j001({"type": "string", "format": "date"}, "xgrammar")
    assert "J003" not in {d.code for d in fine}


def test_a_refused_keyword_does_not_hide_the_rest():
    from sgcli.backends import get_backend
    from sgcli.constraints.jsonpos import SchemaText
    from sgcli.lint import backend_checks as bc
    from sgcli.lint.runner import byte_vocab
    from sgcli.lint.schema_checks import accepts

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "\\cJ"}, "b": {"type": "integer", "minimum": 5}},
        "required": ["a", "b"],
    }
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, indent=2), "s.json", json_options=COMPACT)
    run = bc.compile_with("llguidance", spec, byte_vocab())
    assert run.error is not None  # llguidance's regexes have no \\c (ECMA's control escape)
    compiled, dropped = bc.without_refused(run, spec, SchemaText(spec.text), byte_vocab())
    assert set(dropped) == {("properties", "a", "pattern")}
    assert compiled.backend == get_backend("llguidance").name
    assert accepts(compiled, '{"a":"q","b":5}') and not accepts(compiled, '{"a":"q","b":4}')  # minimum still probed


def test_a_probe_that_breaks_a_keyword_written_elsewhere_names_that_keyword():
    """Kubernetes' resource maps: `additionalProperties` -> `$ref` -> a `oneOf` whose branches both take
    null. Breaking `additionalProperties` with null breaks the `oneOf` (llguidance reads it as anyOf);
    the finding is the `oneOf`'s, where it is written, and folds into its J004."""
    schema = {
        "$defs": {"Quantity": {"oneOf": [{"type": ["string", "null"]}, {"type": ["number", "null"]}]}},
        "type": "object",
        "properties": {"limits": {"type": "object", "additionalProperties": {"$ref": "#/$defs/Quantity"}}},
    }
    named, found = j001(schema, "llguidance")
    assert named == {"oneOf"}, found
    (oneof,) = [d for d in found if d.message.startswith("`oneOf`")]
    assert oneof.code == "J004" and (oneof.line, oneof.col) == (4, 7)  # the "oneOf" key inside $defs
    assert any("found by breaking `additionalProperties` at /properties/limits" in n for n in oneof.notes)
    assert not any(d.code == "J001" for d in found)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "email", "maxLength": 10},
        {"type": "string", "format": "email", "minLength": 30},
        {"type": "string", "format": "hostname", "maxLength": 4},
        {"type": "string", "format": "uri", "minLength": 40, "maxLength": 50},
        {"type": "string", "format": "uri-reference", "maxLength": 1},
    ],
)
def test_an_instance_is_built_for_a_format_beside_a_length(schema):
    """A short email beside maxLength 10 (a Snowplow-style schema) left lint with no instance to probe
    (J003, keyword enforcement not checked): the builder now picks or lengthens a sample of the format."""
    from sgcli.lint.schema_instances import InstanceBuilder, validator

    instance = InstanceBuilder(schema, full=True).build()
    assert not list(validator(schema).iter_errors(instance)), instance


def test_no_j001_below_a_subschema_sgclis_checker_validates_whole():
    """xgrammar leaves an `allOf` of two subschemas to the checker (J004 at the root): four J001 errors
    stood under it ("`minimum` is silently ignored by xgrammar"), where generation refuses what breaks
    them (2026-12-06)."""
    schema = {
        "allOf": [
            {"properties": {"a": {"type": "integer", "minimum": 5}}, "required": ["a"]},
            {"properties": {"b": {"type": "string", "maxLength": 3}}, "required": ["b"]},
        ]
    }
    _, found = j001(schema, "xgrammar")
    assert [d.code for d in found if d.code.startswith("J00")] == ["J004"], found


ANCHORED = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://example.com/root.json",
    "type": "object",
    "properties": {"p": {"$ref": "#pt"}, "q": {"$ref": "other.json#/$defs/x"}, "u": {"$ref": "user"}},
    "required": ["p", "q", "u"],
    "$defs": {
        "pt": {"$anchor": "pt", "enum": ["a", "b"]},
        "o": {"$id": "other.json", "$defs": {"x": {"type": "integer", "minimum": 10, "maximum": 12}}},
        "user": {
            "$id": "user",
            "type": "object",
            "properties": {"id": {"$ref": "#/$defs/id"}},  # this resource's $defs, not the root's
            "required": ["id"],
            "$defs": {"id": {"type": "string", "pattern": "^u[0-9]{2}$"}},
        },
        "id": {"type": "boolean"},
    },
}


def test_an_instance_is_built_through_anchors_and_embedded_ids():
    """`$ref: "#pt"` (an $anchor), `other.json#/...` and `user` (embedded `$id`s) were "remote" refs to the
    builder, so lint checked no keyword of such a schema (J003) though generate resolves them."""
    from sgcli.lint.schema_instances import InstanceBuilder, validator

    instance = InstanceBuilder(ANCHORED, full=True).build()
    assert not list(validator(ANCHORED).iter_errors(instance)), instance
    assert isinstance(instance["u"]["id"], str)
    found = Linter(LintOptions()).lint_spec(ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(ANCHORED), "a.json"))
    assert "J003" not in {d.code for d in found.diagnostics}, found.diagnostics


@pytest.mark.parametrize(
    "schema, says",
    [
        (True, None),  # nothing to probe: `true` stopped the probes with a TypeError, shown as J003
        ({"type": "string", "minLength": 1e30}, "could not build a valid instance"),  # an OverflowError
        ({"type": "array", "minItems": 10**9}, "could not build a valid instance"),
        ({"type": "string", "maxLength": 1e30}, None),  # a maximum that large bounds nothing
    ],
    ids=["true", "minLength 1e30", "minItems 1e9", "maxLength 1e30"],
)
def test_the_probes_stop_with_a_reason_not_an_internal_error(schema, says):
    _, found = j001(schema, "llguidance")
    unprobed = [d.message for d in found if d.code == "J003"]
    assert not any("Error:" in m for m in unprobed), unprobed
    assert (says is None and not unprobed) or (says is not None and says in unprobed[0]), unprobed
