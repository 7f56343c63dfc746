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
