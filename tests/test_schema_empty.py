"""`sgcli.constraints.schema_empty`: a JSON Schema that admits no value, found without a grammar or a model.

Each unsatisfiable form is named at its keyword; each look-alike that some value satisfies is not
(a false alarm would refuse a schema that works). The walk never recurses.
"""

from __future__ import annotations

import json

import pytest

from sgcli.constraints.schema_empty import check_admits_a_value, empty_reason
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError

D4 = "http://json-schema.org/draft-04/schema#"
D7 = "http://json-schema.org/draft-07/schema#"

EMPTY = {
    "false": (False, (), "false"),
    "enum []": ({"enum": []}, ("enum",), "enum"),
    "type []": ({"type": []}, ("type",), "type"),
    "const not in enum": ({"const": 3, "enum": [1, 2]}, ("const",), "const"),
    "not {}": ({"not": {}}, ("not",), "not"),
    "string lengths": ({"type": "string", "minLength": 5, "maxLength": 2}, ("minLength",), "minLength"),
    "number bounds": ({"type": "number", "minimum": 3, "maximum": 2.5}, ("minimum",), "minimum"),
    "exclusive bound": ({"type": "number", "exclusiveMinimum": 2, "maximum": 2}, ("exclusiveMinimum",), None),
    "exclusive max": ({"type": "number", "minimum": 2, "exclusiveMaximum": 2}, ("minimum",), None),
    "draft-4 exclusive": (
        {"$schema": D4, "type": "number", "minimum": 2, "exclusiveMinimum": True, "maximum": 2},
        ("minimum",),
        None,
    ),
    "no integer between": ({"type": "integer", "minimum": 1.2, "maximum": 1.8}, ("minimum",), None),
    "array items": ({"type": "array", "minItems": 3, "maxItems": 1}, ("minItems",), "minItems"),
    "object properties": ({"type": "object", "minProperties": 2, "maxProperties": 1}, ("minProperties",), None),
    "more required than max": (
        {"type": "object", "required": ["a", "b"], "maxProperties": 1},
        ("maxProperties",),
        None,
    ),
    "every type empty": (
        {"type": ["string", "array"], "minLength": 3, "maxLength": 1, "minItems": 3, "maxItems": 1},
        ("minLength",),
        None,
    ),
    "required false": (
        {"type": "object", "properties": {"a": False}, "required": ["a"]},
        ("properties", "a"),
        "properties",
    ),
    "required but not allowed": (
        {"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": False},
        ("required", 0),
        "required",
    ),
    "required nested": (
        {
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"b": {"enum": []}}, "required": ["b"]}},
            "required": ["a"],
        },
        ("properties", "a", "properties", "b", "enum"),
        None,
    ),
    "allOf member": ({"allOf": [{"type": "integer"}, False]}, ("allOf", 1), "allOf"),
    "allOf member's enum": ({"allOf": [{"allOf": [{"enum": []}]}]}, ("allOf", 0, "allOf", 0, "enum"), None),
    "$ref target": ({"$defs": {"x": {"enum": []}}, "$ref": "#/$defs/x"}, ("$defs", "x", "enum"), None),
    "$ref to false": ({"$defs": {"x": False}, "allOf": [{"$ref": "#/$defs/x"}]}, ("allOf", 0, "$ref"), "$ref"),
    # a checked format fixes the lengths a string of it can have
    "date under maxLength 5": ({"type": "string", "format": "date", "maxLength": 5}, ("maxLength",), "maxLength"),
    # draft 4 names no `date`; a later draft's format means the same there, and sgcli checks it (formats.py)
    "draft 4's date": (
        {"$schema": D4, "type": "string", "format": "date", "maxLength": 5},
        ("maxLength",),
        "maxLength",
    ),
    "uuid over minLength 40": ({"type": "string", "format": "uuid", "minLength": 40}, ("minLength",), "minLength"),
    "date-time under 19": ({"type": "string", "format": "date-time", "maxLength": 19}, ("maxLength",), None),
    "ipv4 over 15": ({"type": "string", "format": "ipv4", "minLength": 16}, ("minLength",), None),
}

ADMITS = {
    "true": True,
    "{}": {},
    "lengths without a type (numbers fit)": {"minLength": 5, "maxLength": 2},
    "lengths beside null": {"type": ["string", "null"], "minLength": 5, "maxLength": 2},
    "lengths on an integer": {"type": "integer", "minLength": 5, "maxLength": 2},
    "equal bounds": {"type": "number", "minimum": 2, "maximum": 2},
    "a number between": {"type": "number", "minimum": 1.2, "maximum": 1.8},
    "integer and number": {"type": ["integer", "number"], "minimum": 1.2, "maximum": 1.8},
    "additionalProperties false": {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
    "required among patterns": {
        "type": "object",
        "required": ["b"],
        "patternProperties": {"^b": {}},
        "additionalProperties": False,
    },  # fmt: skip
    "false property not required": {"type": "object", "properties": {"a": False}},
    "required false, object not the only type": {
        "type": ["object", "null"],
        "properties": {"a": False},
        "required": ["a"],
    },  # fmt: skip
    "required false, no type": {"properties": {"a": False}, "required": ["a"]},
    "anyOf branch": {"anyOf": [{"enum": []}, {"type": "string"}]},
    "oneOf branch": {"oneOf": [False, {"type": "string"}]},
    "under not": {"not": {"enum": []}},
    "under if/then/else": {"if": {"type": "string"}, "then": False, "else": {"enum": []}},
    "items of an array": {"type": "array", "items": False},
    "const in enum (1 == 1.0)": {"const": 1, "enum": [1.0, "a"]},
    "draft 4 has no const": {"$schema": D4, "const": 3, "enum": [1, 2]},
    "draft 7: $ref hides its siblings": {"$schema": D7, "$defs": {"x": {}}, "$ref": "#/$defs/x", "enum": []},
    "unused $defs": {"$defs": {"x": False, "y": {"enum": []}}, "type": "string"},
    "a $ref cycle through a property": {
        "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
        "$ref": "#/$defs/n",
    },
    "unknown format": {"type": "string", "format": "hostile-format"},
    "a date of exactly its length": {"type": "string", "format": "date", "minLength": 10, "maxLength": 10},
    "date-time of 20": {"type": "string", "format": "date-time", "maxLength": 20},
    "a format no draft defines": {"$schema": D4, "type": "string", "format": "x-date", "maxLength": 5},
    "a date or null": {"type": ["string", "null"], "format": "date", "maxLength": 5},
}


@pytest.mark.parametrize(
    ("fmt", "shortest", "longest"),
    [
        ("date", "2024-01-02", "2024-01-02"),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"),
    ]
    + [("date-time", "2024-01-02T03:04:05Z", None), ("ipv4", "1.2.3.4", "255.255.255.255")],
)
def test_the_format_lengths_are_those_the_validation_allows(fmt, shortest, longest):
    """The table's bounds hold for sgcli's own validation: a value exists at each bound, none outside."""
    from sgcli.constraints.schema_empty import _FORMAT_LENGTHS
    from sgcli.validation.verdict import schema_errors

    low, high = _FORMAT_LENGTHS[fmt]
    assert len(shortest) == low and not schema_errors({"type": "string", "format": fmt}, shortest)
    assert high is None or (len(longest) == high and not schema_errors({"format": fmt}, longest))
    assert schema_errors({"format": fmt}, shortest[:-1])  # one shorter: invalid


@pytest.mark.parametrize(("schema", "path", "keyword"), EMPTY.values(), ids=EMPTY.keys())
def test_each_form_that_admits_no_value_is_named_at_its_keyword(schema, path, keyword):
    found = empty_reason(schema)
    assert found is not None
    assert found.path == path
    assert found.keyword == (keyword or path[-1])
    assert found.reason


@pytest.mark.parametrize("schema", ADMITS.values(), ids=ADMITS.keys())
def test_look_alikes_that_admit_a_value_are_not_flagged(schema):
    assert empty_reason(schema) is None


def test_the_reason_says_how_a_nested_subschema_applies():
    found = empty_reason(EMPTY["required nested"][0])
    assert found.reason == "`enum` lists no value (the required property 'b', within the required property 'a')"
    assert "named by `$ref` '#/$defs/x'" in empty_reason(EMPTY["$ref target"][0]).reason


def test_5000_levels_of_allOf_do_not_recurse():
    schema: dict = {"enum": []}
    for _ in range(5000):
        schema = {"allOf": [{"type": "string"}, schema]}
    found = empty_reason(schema)
    assert found is not None and found.keyword == "enum" and len(found.path) == 2 * 5000 + 1
    fine: dict = {"$ref": "#/$defs/s"}
    for _ in range(5000):
        fine = {"allOf": [fine]}
    assert empty_reason({"$defs": {"s": {"type": "string", "minLength": 1}}, **fine}) is None


def test_the_error_is_at_the_keywords_line_and_column():
    text = '{\n  "type": "object",\n  "properties": {"a": {"enum": []}},\n  "required": ["a"]\n}'
    with pytest.raises(UserError) as err:
        check_admits_a_value(ConstraintSpec(Kind.JSON_SCHEMA, text, "s.json"))
    assert str(err.value.location) == "s.json:3:24"
    assert err.value.message.startswith("the JSON Schema admits no value: `enum` lists no value")
    assert err.value.hint
    check_admits_a_value(ConstraintSpec(Kind.JSON_SCHEMA, '{"minLength": 5, "maxLength": 2}', "t.json"))  # no error


NODE = {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}, "required": ["next"]}
ENDLESS = {
    "itself": ({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}, ("properties", "a", "$ref")),
    "a linked list with no end": (
        {"$defs": {"n": NODE}, "type": "object", "properties": {"head": {"$ref": "#/$defs/n"}}, "required": ["head"]},
        ("$defs", "n", "properties", "next", "$ref"),
    ),
    "through allOf": (
        {"allOf": [{"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}]},
        ("allOf", 0, "properties", "a", "$ref"),
    ),
}
ENDS = {
    "optional recursion": {"type": "object", "properties": {"a": {"$ref": "#"}}},
    "an array that may be empty": {"$defs": {"n": NODE}, "type": "array", "items": {"$ref": "#/$defs/n"}},
    "a branch that ends": {"type": "object", "properties": {"a": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}}
    | {"required": ["a"]},
    "not only an object": {"type": ["object", "null"], "properties": {"a": {"$ref": "#"}}, "required": ["a"]},
    "the same subschema twice, no cycle": {"$defs": {"s": {"type": "string"}}, "type": "object"}
    | {"properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}}, "required": ["a", "b"]},
}


@pytest.mark.parametrize(("schema", "path"), ENDLESS.values(), ids=ENDLESS.keys())
def test_a_value_that_must_hold_itself_without_end_admits_nothing(schema, path):
    """Every backend compiled `{"properties": {"a": {"$ref": "#"}}, "required": ["a"]}`; generation ran until
    the backend's item limit (exit 1, "ambiguous") and outlines-core's regex took an invalid instance."""
    found = empty_reason(schema)
    assert found is not None and found.path == path and "without end" in found.reason
    with pytest.raises(UserError) as info:
        check_admits_a_value(ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json"))
    assert "no finite value fits" in info.value.message


@pytest.mark.parametrize("schema", ENDS.values(), ids=ENDS.keys())
def test_recursion_with_a_way_out_is_not_flagged(schema):
    assert empty_reason(schema) is None
