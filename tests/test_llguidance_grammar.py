"""The grammar JSON sgcli hands llguidance for a `--schema`: options spliced into the schema's own
text where only `x-guidance` is added, else the parsed schema encoded again; the same value either way."""

from __future__ import annotations

import json

import pytest

from sgcli.backends.llguidance_grammar import schema_entry, schema_grammar
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind

CASES = {
    "plain": '{"type":"object",\n  "properties": {"a":{"type": "string", "pattern": "^x{2,3}$"}}}\n\n',
    "unicode": '{"description": "caf\\u00e9 \u00e9t\u00e9", "enum": ["\u00e9", "\\"q\\""]}',
    "own x-guidance": '{"type": "integer", "x-guidance": {"whitespace_flexible": true}}',
    "near-miss dialect": '{"$schema": "https://json-schema.org/draft-07/schema#", "type": "string"}',
    "empty": "{}",
    "true": "true",
    "false": "false",
}


OPTIONS = [JsonOptions(), JsonOptions(whitespace="compact"), JsonOptions(strict_properties=True)]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("name", CASES)
def test_the_grammar_holds_the_value_the_encoded_schema_would(name, options):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, CASES[name], "s.json", json_options=options)
    schema = spec.schema()
    grammar = json.loads(schema_grammar(spec, schema))
    assert grammar == json.loads(json.dumps({"grammars": [schema_entry(spec, schema, lenient=True)]}))
    lenient = grammar["grammars"][0]["json_schema"]["x-guidance"].get("lenient", False)
    assert lenient is (name != "false")  # `false` is the one keyword llguidance must refuse, never drop


def test_only_x_guidance_is_added_to_the_schemas_own_text():
    spec = ConstraintSpec(Kind.JSON_SCHEMA, CASES["plain"], "s.json")
    assert CASES["plain"].rstrip()[:-1] in schema_grammar(spec, spec.schema())


def test_a_panic_inside_llguidance_reads_as_its_bug_without_the_frames():
    """A Lark `[lazy]` rule over `/[^\\n]*/` made llguidance 1.9.1 assert at the first mask (`masks`,
    `generate`): the message came with ~100 backtrace frames, and `masks` said "PoisonError" (the
    prototype's lock, poisoned by the first panic). Now one line, from the first panic."""
    from sgcli.backends.diagnostics import diagnose_llguidance

    raw = "panic: assertion failed: !state.has_lowest_match()\n<backtrace>\n 0: <unknown>\n 1: f at x.c:1\n"
    message = diagnose_llguidance(raw).message
    assert message == (
        "llguidance panicked (its own bug, not a mistake in the input): assertion failed: !state.has_lowest_match()"
    )


def test_a_matcher_with_no_way_on_is_said_in_words_not_its_rust_name():
    """`masks` and generation records showed llguidance's bare "NoExtensionBias"."""
    from sgcli.backends.diagnostics import diagnose_llguidance

    message = diagnose_llguidance("NoExtensionBias").message
    assert "allows no next token and no end here" in message and "NoExtensionBias" in message
