"""A subschema no value can take, reached only where leaving it out changes nothing (an `anyOf`
branch, an optional property), no longer sinks the schema on llguidance (dbt-core's own
`dbt_project.yml` schema was refused by every backend: llguidance called one `anyOf` branch
unsatisfiable, xgrammar ran past the time limit)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from sgcli.backends.unsatisfiable import left_out, unsatisfiable_pointer

# dbt's shape: the object requires `field`, and its only anyOf branch forbids it
IMPOSSIBLE = {
    "type": "object",
    "required": ["field"],
    "properties": {"field": {"type": "string"}},
    "additionalProperties": False,
    "anyOf": [{"type": "object", "properties": {"other": {}}, "additionalProperties": False}],
}
SCHEMA = {
    "type": "object",
    "properties": {
        "partition_by": {"anyOf": [{"type": "string"}, {"$ref": "#/definitions/Impossible", "description": "d"}]},
        "maybe": {"$ref": "#/definitions/Impossible"},
        "inline": {"oneOf": [{"type": "integer"}, IMPOSSIBLE]},
    },
    "required": ["partition_by"],
    "definitions": {"Impossible": IMPOSSIBLE},
}


def test_the_pointer_is_read_from_llguidances_error():
    message = (
        "Unsatisfiable schema: required property 'field' is unsatisfiable\n"
        "  while processing json-schema:///#/definitions/Bigquery%20Config"
    )
    assert unsatisfiable_pointer(message) == "/definitions/Bigquery Config"
    assert unsatisfiable_pointer("Unknown format: uuid") is None


def test_branches_and_optional_properties_that_hold_only_it_become_false():
    pruned, places = left_out(SCHEMA, "/definitions/Impossible")
    assert sorted(places) == ["/properties/maybe", "/properties/partition_by/anyOf/1"]
    assert pruned["properties"]["partition_by"]["anyOf"] == [{"type": "string"}, False]
    assert pruned["properties"]["maybe"] is False
    assert SCHEMA["properties"]["maybe"] == {"$ref": "#/definitions/Impossible"}  # the caller's schema is kept
    pruned, places = left_out(SCHEMA, "/properties/inline/oneOf/1")
    assert places == ["/properties/inline/oneOf/1"] and pruned["properties"]["inline"]["oneOf"][1] is False


def test_the_pruned_schema_has_the_same_instances():
    pruned, _ = left_out(SCHEMA, "/definitions/Impossible")
    instances = [
        {"partition_by": "x"},
        {"partition_by": {"field": "f"}},
        {"partition_by": {}},
        {"partition_by": "x", "maybe": {"field": "f"}},
        {"partition_by": "x", "maybe": {}},
        {"partition_by": "x", "inline": 3},
        {"partition_by": "x", "extra": [1]},
        {},
    ]
    for instance in instances:
        assert jsonschema.Draft7Validator(SCHEMA).is_valid(instance) == jsonschema.Draft7Validator(pruned).is_valid(
            instance
        ), instance


@pytest.mark.parametrize(
    "schema",
    [
        # where it must hold a value: a required property, an allOf, a $ref with assertions beside it
        {"properties": {"a": {"$ref": "#/definitions/I"}}, "required": ["a"], "definitions": {"I": IMPOSSIBLE}},
        {"allOf": [{"$ref": "#/definitions/I"}], "definitions": {"I": IMPOSSIBLE}},
        {"properties": {"a": {"$ref": "#/definitions/I", "minProperties": 1}}, "definitions": {"I": IMPOSSIBLE}},
        # every branch of the anyOf: the refusal is right
        {"anyOf": [{"$ref": "#/definitions/I"}, {"$ref": "#/definitions/I"}], "definitions": {"I": IMPOSSIBLE}},
        # a value, not a schema, that looks like one
        {"enum": [{"anyOf": [1, {"$ref": "#/definitions/I"}]}], "definitions": {"I": IMPOSSIBLE}},
        # below an embedded `$id`, `#/definitions/I` is that resource's own, not the root's
        {
            "definitions": {"I": IMPOSSIBLE},
            "properties": {
                "a": {
                    "$id": "https://example.com/a",
                    "anyOf": [{"type": "string"}, {"$ref": "#/definitions/I"}],
                    "definitions": {"I": {"type": "integer"}},
                }
            },
        },
    ],
)
def test_a_place_that_must_hold_a_value_keeps_the_refusal(schema):
    assert left_out(schema, "/definitions/I") is None


def test_llguidance_compiles_it_saying_what_it_left_out_and_the_masks_keep_the_language(run_cli, tmp_path):
    path = tmp_path / "dbt-shaped.json"
    path.write_text(json.dumps(SCHEMA))
    result = run_cli("compile", "--schema", path, "--backend", "llguidance", "--no-cache")
    shown = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "/properties/partition_by/anyOf/1" in shown and "/properties/maybe" in shown and "made false" in shown
    for text, verdict in [
        ('{"partition_by":"x"}', "accepted"),
        ('{"partition_by":"x","inline":3}', "accepted"),
        ('{"partition_by":{"field":"f"}}', "rejected"),
        ('{"partition_by":"x","maybe":{}}', "rejected"),
    ]:
        masks = run_cli("masks", "--schema", path, "--backend", "llguidance", "--text", text, "--json")
        summary = [json.loads(line) for line in masks.stdout.splitlines()][-1]
        assert summary["verdict"] == verdict, (text, summary)


def test_a_schema_refused_for_a_required_impossible_property_is_still_refused(run_cli, tmp_path):
    path = tmp_path / "impossible.json"
    required = {"properties": {"a": {"$ref": "#/definitions/I"}}, "required": ["a"], "definitions": {"I": IMPOSSIBLE}}
    path.write_text(json.dumps(required))
    result = run_cli("compile", "--schema", path, "--backend", "llguidance", "--no-cache")
    assert result.exit_code == 1 and "Unsatisfiable" in result.output and "made false" not in result.output


def test_lint_places_the_note_at_a_place_it_made_false(run_cli, tmp_path):
    path = tmp_path / "dbt-shaped.json"
    path.write_text(json.dumps(SCHEMA, indent=2))
    lines = [line for line in run_cli("lint", path).output.splitlines() if "S002" in line and "made false" in line]
    assert len(lines) == 1, lines
    pointer = lines[0].rsplit("(at ", 1)[1].rstrip(")")
    assert pointer in ("/properties/maybe", "/properties/partition_by/anyOf/1")
    key = '"maybe"' if pointer.endswith("maybe") else '"$ref"'
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if key in text)
    assert f"{path}:{line}:" in lines[0], (lines[0], line)
