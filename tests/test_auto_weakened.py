"""`auto` (the default) falls back loudly: the keywords the chosen backend does not enforce are
named with their JSON pointers, each claim is checked against that backend's bare matcher, and
sgcli's schema checker (what `compile_for` hands the decode loop) refuses what the grammar let through."""

from __future__ import annotations

import json

from sgcli.backends import DEFAULT_BACKEND, compile_for
from sgcli.backends.keyword_coverage import weakened_keywords
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.lint.runner import byte_vocab
from sgcli.lint.schema_checks import accepts


def compiled_auto(schema):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json").for_generation()  # as generate does
    return compile_for("auto", spec, byte_vocab())


def test_default_backend_is_auto():
    assert DEFAULT_BACKEND == "auto"


def test_llguidance_first_and_nothing_weakened():
    compiled, fallbacks = compiled_auto({"type": "integer", "minimum": 5})
    assert (compiled.backend, fallbacks, weakened_keywords(compiled)) == ("llguidance", [], [])


def test_fallback_names_every_weakened_keyword_and_the_claims_hold():
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
            "n": {"type": "integer", "not": {"const": 3}},
        },
        "required": ["tags", "n"],
    }
    compiled, fallbacks = compiled_auto(schema)
    # llguidance, compiled lenient, drops what it does not implement; xgrammar leaves the same two: a tie
    assert (compiled.backend, fallbacks) == ("llguidance", [])
    weakened = {(w["pointer"], w["keyword"]) for w in weakened_keywords(compiled)}
    assert weakened == {("/properties/tags/uniqueItems", "uniqueItems"), ("/properties/n/not", "not")}
    # each named keyword really is unenforced: the bare matcher takes an instance breaking only it...
    bare = compiled.inner
    breaking = ('{"tags": [1, 1], "n": 4}', '{"tags": [1], "n": 3}')
    assert all(accepts(bare, text) for text in breaking)
    assert not accepts(bare, '{"tags": [1], "n": "x"}')  # what is not named is enforced
    # ...and the checked matcher refuses both, while the valid instance still passes
    assert not any(accepts(compiled, text) for text in breaking)
    assert accepts(compiled, '{"tags": [1, 2], "n": 4}')


def test_keywords_beside_any_of_are_named_for_xgrammar():
    from sgcli.backends import get_backend

    schema = {"type": "integer", "minimum": 5, "title": "t", "anyOf": [{"multipleOf": 2}, {"multipleOf": 3}]}
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json")
    compiled = get_backend("xgrammar").compile(spec, byte_vocab())
    weakened = {(w["pointer"], w["keyword"]) for w in weakened_keywords(compiled)}
    # the siblings of anyOf, and the branches' multipleOf without a `type` beside it (measured dropped)
    assert weakened == {
        ("/type", "type"),
        ("/minimum", "minimum"),
        ("/anyOf/0/multipleOf", "multipleOf"),
        ("/anyOf/1/multipleOf", "multipleOf"),
    }
    assert accepts(compiled, "4")  # minimum 5 dropped
    llg = get_backend("llguidance").compile(spec, byte_vocab())
    assert weakened_keywords(llg) == [] and not accepts(llg, "4")


# Snowplow's event schemas (Iglu Central), as a user pastes them: a self-describing `$schema`, lengths beside
# `format`, a number's `multipleOf`. llguidance refused every one (it fetches the `$schema` URI), and auto fell
# back to xgrammar, which drops those three keywords and said so only in a compile warning.
SNOWPLOW = {
    "$schema": "http://iglucentral.com/schemas/com.snowplowanalytics.self-desc/schema/jsonschema/1-0-0#",
    "self": {"vendor": "com.example", "name": "link_click", "format": "jsonschema", "version": "1-0-0"},
    "type": "object",
    "properties": {
        "targetUrl": {"type": "string", "format": "uri", "minLength": 1, "maxLength": 4096},
        "ratio": {"type": "number", "multipleOf": 0.01},
        "count": {"type": "integer", "minimum": 0, "multipleOf": 5},
    },
    "required": ["targetUrl"],
    "additionalProperties": False,
}


def test_a_schema_whose_dollar_schema_names_no_draft_compiles_on_llguidance_as_2020_12_with_a_note():
    compiled, fallbacks = compiled_auto(SNOWPLOW)
    assert compiled.backend == "llguidance" and fallbacks == []
    assert any("names no JSON Schema draft" in w.message for w in compiled.warnings)
    # its fractional multipleOf is left to the checker: llguidance divides in decimal, jsonschema in floats
    assert weakened_keywords(compiled) == [
        {"pointer": "/properties/ratio/multipleOf", "keyword": "multipleOf", "backend": "llguidance"}
    ]
    for uri in ("http://json-schema.org/schema#", "https://example.com/meta"):  # the old "latest" alias, a private one
        assert compiled_auto({"$schema": uri, "type": "integer"})[0].backend == "llguidance"


def test_keywords_xgrammar_drops_with_only_a_warning_are_left_to_the_checker():
    from sgcli.backends.keyword_coverage import compiled_gaps, schema_gaps

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(SNOWPLOW), "s.json")
    expected = {"/properties/targetUrl/minLength", "/properties/targetUrl/maxLength"} | {
        "/properties/ratio/multipleOf",
        "/properties/count/multipleOf",
    }
    assert {g.pointer for g in schema_gaps(spec, "xgrammar")} == expected  # declared, before compiling
    compiled, _ = compile_for("xgrammar", spec, byte_vocab())
    assert {g.pointer for g in compiled_gaps(compiled)} == expected
    assert all(g.checker for g in compiled_gaps(compiled))
    for instance in ({"targetUrl": "https://a.b/" + "x" * 4090}, {"targetUrl": "u:x", "ratio": 0.005}):
        assert not accepts(compiled, json.dumps(instance))  # the schema checker refuses what the grammar let through


def test_a_warning_that_says_a_keyword_is_ignored_points_at_every_place_it_stands():
    from sgcli.backends.schema_warnings import pointers_for

    schema = {"properties": {"a": {"type": "number", "multipleOf": 0.5}, "b": {"type": "integer", "multipleOf": 2}}}
    assert pointers_for(schema, "multipleOf is not supported for type:number; ignoring multipleOf") == [
        "/properties/a/multipleOf"
    ]
    assert pointers_for(schema, "something new; ignoring multipleOf") == [
        "/properties/a/multipleOf",
        "/properties/b/multipleOf",
    ]
    lengths = {"type": "string", "format": "email", "minLength": 3, "maxLength": 9}
    assert pointers_for(
        lengths, "format combined with minLength/maxLength is not supported; ignoring minLength/maxLength"
    ) == [
        "/minLength",
        "/maxLength",
    ]
    assert pointers_for(lengths, "ignoring the moon") == []
