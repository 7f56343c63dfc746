"""`auto` (the default) falls back loudly: the keywords the chosen backend does not enforce are
named with their JSON pointers, and each claim is checked against that backend's matcher."""

from __future__ import annotations

import json

from sgcli.backends import DEFAULT_BACKEND, compile_for
from sgcli.backends.schema_warnings import weakened_keywords
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.lint.runner import byte_vocab
from sgcli.lint.schema_checks import accepts


def compiled_auto(schema):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json")
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
    assert compiled.backend == "xgrammar" and fallbacks[0]["backend"] == "llguidance"
    weakened = {(w["pointer"], w["keyword"]) for w in weakened_keywords(compiled)}
    assert weakened == {("/properties/tags/uniqueItems", "uniqueItems"), ("/properties/n/not", "not")}
    # each named keyword really is unenforced: its matcher takes an instance breaking only it
    assert accepts(compiled, '{"tags": [1, 1], "n": 4}') and accepts(compiled, '{"tags": [1], "n": 3}')
    assert not accepts(compiled, '{"tags": [1], "n": "x"}')  # what is not named is enforced


def test_keywords_beside_any_of_are_named_for_xgrammar():
    from sgcli.backends import get_backend

    schema = {"type": "integer", "minimum": 5, "title": "t", "anyOf": [{"multipleOf": 2}, {"multipleOf": 3}]}
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json")
    compiled = get_backend("xgrammar").compile(spec, byte_vocab())
    assert {w["keyword"] for w in weakened_keywords(compiled)} == {"type", "minimum"}
    assert accepts(compiled, "4")  # minimum 5 dropped
    llg = get_backend("llguidance").compile(spec, byte_vocab())
    assert weakened_keywords(llg) == [] and not accepts(llg, "4")
