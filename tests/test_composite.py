"""Composite grammars (as in mistral.rs's llguidance example): Lark with `@name` JSON sub-grammars."""

from __future__ import annotations

import json
import re

import pytest
from helpers import generate_with

from sgcli.backends import get_backend
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError

TOP = 'start: "Reasoning: " REASON "\\nJSON: " @myobj\nREASON: /[^\\n]{0,40}/\n'
ANSWER = {
    "type": "object",
    "properties": {"answer": {"enum": ["Yes", "No"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
SHAPE = re.compile(r"Reasoning: ([^\n]{0,40})\nJSON: (.*)", re.S)


def composite(schema=ANSWER, top=TOP) -> ConstraintSpec:
    sub = ConstraintSpec(
        Kind.JSON_SCHEMA, json.dumps(schema, indent=2), "answer.schema.json", json_options=JsonOptions("compact")
    )
    return ConstraintSpec(Kind.LARK, top, "top.lark", subgrammars=(("myobj", sub),))


def test_random_model_writes_reasoning_then_the_json_answer(tiny_lm, smol_tokenizer):
    spec = composite()
    answers = set()
    for seed in range(4):
        record = generate_with(tiny_lm, smol_tokenizer, spec, "llguidance", seed=seed, max_tokens=80)
        assert record["finish_reason"] == "stop" and record["valid"], record
        m = SHAPE.fullmatch(record["output"])
        assert m, record["output"]
        answers.add(json.loads(m.group(2))["answer"])
        assert m.group(2) in ('{"answer":"Yes"}', '{"answer":"No"}')  # compact, as the sub-grammar asked
    assert answers <= {"Yes", "No"}


def test_top_level_grammar_json_is_the_same_language(smol_tokenizer):
    """The same grammar written in llguidance's own {"grammars": [...]} shape."""
    llg = json.dumps(
        {
            "grammars": [
                {"lark_grammar": TOP},
                {"name": "myobj", "json_schema": {**ANSWER, "x-guidance": {"whitespace_flexible": False}}},
            ]
        }
    )
    backend = get_backend("llguidance")
    a = backend.compile(composite(), smol_tokenizer.vocab)
    b = backend.compile(ConstraintSpec(Kind.LLGUIDANCE, llg, "g.llg.json"), smol_tokenizer.vocab)
    for text, ok in [
        ('Reasoning: why not\nJSON: {"answer":"No"}', True),
        ('Reasoning: \nJSON: {"answer":"Yes"}', True),
        ('Reasoning: hmm\nJSON: {"answer":"Maybe"}', False),
        ('Reasoning: hmm\nJSON: {"answer": "No"}', False),
        ('JSON: {"answer":"No"}', False),
    ]:
        for compiled in (a, b):
            m = compiled.matcher()
            accepted = all(m.accept(t) for t in smol_tokenizer.vocab.encode(text)) and m.can_stop()
            assert accepted is ok, (text, compiled.spec.kind)


def test_error_in_the_sub_grammar_points_into_its_own_file(smol_tokenizer):
    bad = {"type": "object", "properties": {"when": {"type": "string", "format": "bogus"}}}
    with pytest.raises(UserError) as info:
        get_backend("llguidance").compile(composite(schema=bad), smol_tokenizer.vocab)
    e = info.value
    assert e.message == "JSON Schema rejected by llguidance: Unknown format: bogus (at /properties/when/format)"
    assert (e.location.path, e.location.line, e.location.col) == ("answer.schema.json", 6, 17)


def test_unknown_reference_points_at_it_in_the_lark_file(smol_tokenizer):
    with pytest.raises(UserError) as info:
        get_backend("llguidance").compile(composite(top='start: "x" @other\n'), smol_tokenizer.vocab)
    e = info.value
    assert e.message == "Lark rejected by llguidance: unknown grammar @other"
    assert (e.location.path, e.location.line, e.location.col) == ("top.lark", 1, 12)
    assert "--sub other=FILE" in e.hint  # the grammar is fine: the command lacks the sub-grammar


def test_lint_of_a_lark_file_without_its_sub_grammar_names_the_flag(run_cli):
    result = run_cli("lint", "examples/reasoning_json.lark", "--output-format", "json")
    (finding,) = json.loads(result.stdout)  # sgcli's own finding, before any backend's "unknown grammar"
    assert (finding["code"], finding["line"], finding["col"]) == ("G001", 3, 40), finding
    assert "--sub answer=FILE" in finding["hint"]


def test_a_missing_sub_grammar_is_exit_2_at_its_reference_naming_the_flag(run_cli):
    """Without `--sub answer=FILE` each backend said "unknown grammar @answer" in its own words, then "every
    backend failed"; none said how to give it."""
    for args in (
        ["generate", "--lark", "examples/reasoning_json.lark", "hi"],
        ["compile", "examples/reasoning_json.lark"],
    ):
        result = run_cli(*args)
        assert result.exit_code == 2, result.output
        assert "examples/reasoning_json.lark:3:40: `@answer` names a sub-grammar" in result.stderr
        assert "--sub answer=FILE" in result.stderr and "every backend failed" not in result.stderr
