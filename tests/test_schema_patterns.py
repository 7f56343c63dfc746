"""JSON Schema regexes in the ECMA-262 syntax the specification names, which Python's `re` lacks: `\\p{L}`,
`(?<name>...)`, `\\u{1F600}`, `\\cJ`. Meta-validation read `pattern` (`format: regex`) with `re`, so 270 of
1,898 cfn-lint resource schemas, check-jsonschema's CircleCI schema and any pydantic model with `\\p{..}`
were "invalid JSON Schema" (exit 2), and the checker (jsonschema, `re` again) could not enforce them."""

from __future__ import annotations

import json

import pytest

from sgcli.backends import compile_for
from sgcli.backends.matching import feed
from sgcli.backends.schema_checker import CheckedCompiled
from sgcli.constraints.schema_input import check_schema
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError
from sgcli.lint.runner import byte_vocab
from sgcli.validation.verdict import schema_errors

NAME = {"type": "string", "pattern": "^\\p{Lu}\\p{Ll}+$", "maxLength": 12}
PERSON = {"type": "object", "properties": {"name": NAME}, "required": ["name"], "additionalProperties": False}


def spec_of(schema, **options) -> ConstraintSpec:
    return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json", **options)


@pytest.mark.parametrize(
    "pattern",
    [
        "^([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)$",  # CloudFormation's Tag key
        "^(?<year>[0-9]{4})$",
        "^\\u{1F600}$",
        "^a\\cJb$",
    ],
)
def test_an_ecma_pattern_re_cannot_read_is_a_valid_schema(pattern):
    check_schema(spec_of({"type": "string", "pattern": pattern}))
    check_schema(spec_of({"type": "object", "patternProperties": {pattern: {}}}))


def test_a_pattern_broken_in_every_dialect_is_still_refused_at_its_place():
    with pytest.raises(UserError) as refused:
        check_schema(spec_of({"type": "string", "pattern": "[a-"}))
    assert "'[a-'" in str(refused.value) and "at position 3" in str(refused.value)
    assert refused.value.location.col == 31  # the pattern's value


@pytest.mark.parametrize(
    ("pattern", "valid", "invalid"),
    [
        ("^\\p{Lu}\\p{Ll}+$", "Émile", "emile"),
        ("^(?<year>[0-9]{4})$", "2024", "24"),
        ("^\\u{1F600}$", "\U0001f600", "x"),
        ("^a\\cJb$", "a\nb", "aJb"),
        ("^\\w+$", "abc", "\u0301"),  # `re` reads what it can, as jsonschema always has (no marks in `\w`)
    ],
)
def test_the_checks_read_those_patterns(pattern, valid, invalid):
    schema = {"type": "string", "pattern": pattern}
    assert schema_errors(schema, valid) == []
    assert schema_errors(schema, invalid)
    keys = {"type": "object", "patternProperties": {pattern: {"type": "integer"}}}
    assert schema_errors(keys, {valid: 1, invalid: "x"}) == []
    assert schema_errors(keys, {valid: "x"})


def test_the_schema_checker_enforces_a_unicode_class_pattern_a_grammar_leaves_out():
    """outlines-core ignores `pattern`: it was "enforced by nothing" (`re` could not read it), now the
    checker holds it while decoding."""
    vocab = byte_vocab()
    compiled = compile_for("outlines_core", spec_of(PERSON), vocab)[0]
    assert isinstance(compiled, CheckedCompiled)
    assert feed(compiled, vocab.encode('{"name":"Émile"}')).accepted
    assert not feed(compiled, vocab.encode('{"name":"emile"}')).accepted


def test_lint_passes_and_every_backend_compiles_the_schema(run_cli, tmp_path):
    schema = tmp_path / "name.json"
    schema.write_text(json.dumps(PERSON))
    linted = run_cli("lint", str(schema))
    assert linted.exit_code == 0, linted.output
    compiled = run_cli("compile", str(schema), "-b", "llguidance")
    assert compiled.exit_code == 0, compiled.output
    broken = tmp_path / "broken.json"
    broken.write_text('{"type": "string", "pattern": "[a-"}')
    refused = run_cli("compile", str(broken), "-b", "llguidance")
    assert refused.exit_code == 2 and f"{broken}:1:31" in refused.output, refused.output
    linted = run_cli("lint", str(broken))  # lint reports it as a finding, at its place
    assert linted.exit_code == 1 and f"{broken}:1:31: S003" in linted.output, linted.output


@pytest.mark.parametrize("backend", ["llguidance", "outlines_core"])  # its grammar, or sgcli's checker
def test_generation_gives_only_outputs_the_pattern_takes(tiny_lm, smol_tokenizer, backend):
    import regex
    from helpers import generate_with

    spec = spec_of(PERSON, json_options=JsonOptions(whitespace="compact"))
    for seed in range(3):
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=40)
        if record["valid"]:
            assert regex.fullmatch("\\p{Lu}\\p{Ll}+", json.loads(record["output"])["name"]), record["output"]
        else:
            assert record["valid"] is False


def _within(seconds: float, fn):
    """fn's result, or the test fails when it has not returned within `seconds` (a hang, not a slow pass)."""
    import threading

    found = []
    worker = threading.Thread(target=lambda: found.append(_outcome(fn)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert found, f"still running after {seconds} s"
    return found[0]


def _outcome(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - the test reads which
        return exc


@pytest.mark.parametrize("text", ["a" * 40 + "!", "a" * 40 + "é!"])  # read by the regex package; by `re`, bounded
def test_a_backtracking_pattern_is_no_verdict_in_bounded_time_not_a_hang(monkeypatch, text):
    """`^(a|aa)+$` on 40 a's and a wrong last character: Python's `re` (jsonschema's reader, no timeout)
    backtracked for hours, in the output check and the decode loop's checker."""
    from sgcli.constraints import regex_dialects, schema_patterns

    monkeypatch.setattr(regex_dialects, "MATCH_TIMEOUT_S", 0.5)
    monkeypatch.setattr(schema_patterns, "MATCH_TIMEOUT_S", 0.5)
    schema = {"type": "string", "pattern": "^(a|aa)+$"}
    found = _within(60, lambda: schema_errors(schema, text))
    assert "longer than 0.5 s" in str(found), found
    assert schema_errors(schema, "a" * 40) == []  # a match is found at once either way


@pytest.mark.parametrize(
    "text",
    ["héllo wörld", "a\x1cb", "x²", "ab ", "İi", "KI", "\u212aı", "a_1 b", "٣٤", "a\u2028b", "a\x85b"],
)
@pytest.mark.parametrize("pattern", ["^(\\w+\\s?)+$", "^(?i:(ki|i)+)$", "^(\\d+|x)+\\W*$"])
def test_a_bounded_match_reads_the_pattern_as_re_does(pattern, text):
    """The bounded readings (the regex package on plain text, `re` in a child otherwise) give `re`'s answer:
    its `\\w`, `\\d`, `\\s` and case folding differ from the regex package's beyond ASCII and at U+001C-U+001F."""
    import re

    from sgcli.constraints.schema_patterns import _may_backtrack, finds

    assert _may_backtrack(pattern)
    assert finds(pattern, text * 3) is (re.search(pattern, text * 3) is not None), (pattern, text)


@pytest.mark.parametrize(
    ("pattern", "text", "found"),
    [
        ("^[a-z]+$", "abc\n", False),  # `re`'s `$` matched before a last newline: a server's "abc\n" was valid
        ("^\\d+$", "12\n", False),
        ("^[a-z]+$", "abc", True),
        ("a$?b", "ab", True),  # a quantified `$` still reads
        ("^[$]+$", "$$", True),  # inside a class, a literal
        ("^a\\$$", "a$", True),  # escaped, a literal
        ("(?m)^a$", "a\nb", True),  # asked for: line ends
        ("^\\p{Lu}+$", "AB\n", False),  # a pattern only the regex package reads, the same way
    ],
)
def test_dollar_is_the_end_of_the_text_as_ecma_reads_it(pattern, text, found):
    schema = {"type": "string", "pattern": pattern}
    assert (schema_errors(schema, text) == []) is found


def test_a_name_with_a_last_newline_is_no_match_for_a_pattern_property(run_cli, tmp_path):
    schema = tmp_path / "p.json"
    schema.write_text(json.dumps({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}}))
    result = run_cli("masks", "--schema", schema, "-b", "xgrammar", "--text", '{"abc\\n": 1}', "--json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout.splitlines()[-1])["verdict"] != "accepted"
