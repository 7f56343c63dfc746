"""Constraint guarantees under an adversary: a random model that tries every token the mask allows.

Every guarantee runs on every backend that enforces grammars and supports the constraint's kind.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from helpers import generate_with

from sgcli.backends import get_backend
from sgcli.backends.matching import enforcing_backends
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind

SEEDS = range(12)


def backends_taking(kind: Kind) -> list[str]:
    return [n for n in enforcing_backends() if kind in get_backend(n).capabilities.kinds]


PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 10},
        "age": {"type": "integer", "minimum": 0, "maximum": 130},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "tags", "ok"],
    "additionalProperties": False,
}
NESTED = {
    "type": "object",
    "properties": {
        "point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
            "required": ["x", "y"],
            "additionalProperties": False,
        },
        "kind": {"enum": ["circle", "square"]},
        "note": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]},
    },
    "required": ["point", "kind", "note"],
    "additionalProperties": False,
}


def _schema_cases():
    """(schema, backend) pairs: every schema on every backend that takes one. (outlines-core on PERSON,
    whose schema checker walks back the random model's strings and arrays, once took 22-50 s a layout:
    that was pytest-xdist's workers spinning torch's threads against each other, see conftest.py; 3-5 s.)"""
    for schema, name in ((PERSON, "person"), (NESTED, "nested")):
        for backend in backends_taking(Kind.JSON_SCHEMA):
            yield pytest.param(schema, backend, id=f"{name}-{backend}")


@pytest.mark.parametrize("schema, backend", list(_schema_cases()))
@pytest.mark.parametrize(
    "options", [JsonOptions(whitespace="compact"), JsonOptions(max_whitespace=2)], ids=["compact", "max-ws-2"]
)
def test_every_schema_output_parses_and_validates(tiny_lm, smol_tokenizer, schema, options, backend):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "test", json_options=options)
    for seed in SEEDS:
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=400)
        if record["finish_reason"] != "stop":
            # a dead end of sgcli's schema checker (a number past a bound the grammar does not enforce, that
            # more digits cannot bring back): never a success, and only where the checker decodes
            assert record["valid"] is False and record["weakened"], record
            continue
        parsed = json.loads(record["output"])
        # Whatever the backend's grammar leaves unenforced, sgcli's schema checker enforces while decoding
        assert not _violated_keywords(schema, parsed), (record["weakened"], record["output"])
        # a number past a double's range (random logits write 548e+28668683) is judged, and kept out of
        # `parsed`: the record stays strict JSON
        assert record["valid"] and record["parsed"] == (parsed if _finite(parsed) else None) and not record["errors"]


# Only the name `a`, open to it again: the grammar forces a second `"a"` after a comma, which only the
# repeated-key guard (llguidance; sgcli's checker on xgrammar) stops: without it, llguidance's runs repeat it
OPEN_KEYS = {"type": "object", "patternProperties": {"^a$": {"type": "integer"}}, "additionalProperties": False}


# outlines-core has no `patternProperties` (it refuses the schema); xgrammar leaves it to sgcli's checker
@pytest.mark.parametrize("backend", [b for b in backends_taking(Kind.JSON_SCHEMA) if b != "outlines_core"])
def test_no_output_repeats_a_key_where_no_checker_runs(tiny_lm, smol_tokenizer, backend):
    """A tiny random model wrote `{"x8":811,"x8":8013498665985}` under llguidance (patternProperties and
    maxProperties; finish `stop`, `valid: false`): no checker ran, and the grammar lets a key repeat. The
    repeated-key guard masks it, and decoding backtracks out of the comma that forces the repeat."""
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(OPEN_KEYS), "test", json_options=JsonOptions("compact"))
    for seed in SEEDS:
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=60)
        if record["finish_reason"] != "stop":
            assert record["valid"] is False, record
            continue
        pairs = json.loads(record["output"], object_pairs_hook=lambda kv: kv)
        assert len({k for k, _ in pairs}) == len(pairs), record["output"]
        assert record["valid"], record


def _finite(value) -> bool:
    if isinstance(value, float):
        return value not in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return all(_finite(v) for v in value) if isinstance(value, list) else True


def _violated_keywords(schema, instance) -> set[str]:
    """JSON pointers of the schema keywords `instance` violates (independent check: jsonschema)."""
    validator = jsonschema.Draft202012Validator(schema)
    return {"".join(f"/{p}" for p in e.absolute_schema_path) for e in validator.iter_errors(instance)}


@pytest.mark.parametrize("backend", backends_taking(Kind.JSON_SCHEMA))
def test_compact_output_has_no_whitespace_outside_strings(tiny_lm, smol_tokenizer, backend):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(NESTED), "t", json_options=JsonOptions(whitespace="compact"))
    for seed in SEEDS:
        out = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=400)["output"]
        json.loads(out)
        assert not any(ch.isspace() for ch in _outside_strings(out)), out


def _outside_strings(text: str) -> str:
    """The characters of a JSON text that are not inside string literals."""
    kept, in_string, escaped = [], False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            kept.append(ch)
    return "".join(kept)


@pytest.mark.parametrize("backend", backends_taking(Kind.REGEX))
# ASCII classes, not \d: llguidance's \d follows a newer Unicode than Python 3.11's `re` (it takes
# U+1E4F7, a Unicode 15 digit, which `re` and so sgcli's validation reject).
@pytest.mark.parametrize("pattern", [r"[0-9]{3}-[a-z]{2,4}", r"(yes|no|maybe)!?", r"[0-9]+(\.[0-9]{1,2})?"])
def test_every_regex_output_matches(tiny_lm, smol_tokenizer, pattern, backend):
    spec = ConstraintSpec(Kind.REGEX, pattern, "--regex")
    for seed in SEEDS:
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=60)
        if record["finish_reason"] == "length":  # \d+ may legitimately run on; never a success
            assert not record["valid"]
            continue
        assert re.fullmatch(pattern, record["output"]), record
        assert record["valid"]


@pytest.mark.parametrize("backend", backends_taking(Kind.CHOICE))
def test_every_choice_output_is_a_choice(tiny_lm, smol_tokenizer, backend):
    choices = ("Paris", "London", "Ber lin", "東京", "a.b*c")
    spec = ConstraintSpec(Kind.CHOICE, "\n".join(choices), "--choice", choices=choices)
    seen = set()
    for seed in range(20):
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=20)
        assert record["output"] in choices and record["valid"], record
        seen.add(record["output"])
    assert len(seen) >= 2  # random logits reach more than one branch


@pytest.mark.parametrize("backend", backends_taking(Kind.EBNF))
def test_ebnf_output_is_a_sentence_of_the_grammar(tiny_lm, smol_tokenizer, backend):
    grammar = 'root ::= item ("," item){0,3}\nitem ::= [a-c] | "(" [0-9] ")"'
    spec = ConstraintSpec(Kind.EBNF, grammar, "g.ebnf")
    for seed in SEEDS:
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=40)
        assert re.fullmatch(r"([a-c]|\([0-9]\))(,([a-c]|\([0-9]\))){0,3}", record["output"]), record
        assert record["valid"]


def test_unconstrained_backend_is_really_unconstrained(tiny_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, "[0-9]", "--regex")
    outputs = {
        generate_with(tiny_lm, smol_tokenizer, spec, backend="none", seed=s, max_tokens=5)["output"] for s in range(3)
    }
    assert not all(re.fullmatch("[0-9]", o) for o in outputs)


def test_truncation_is_length_and_invalid(tiny_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PERSON), "t", json_options=JsonOptions(whitespace="compact"))
    record = generate_with(tiny_lm, smol_tokenizer, spec, seed=0, max_tokens=3)
    assert record["finish_reason"] == "length"
    assert record["valid"] is False
    assert any("max-tokens" in e for e in record["errors"])


def test_stop_string_ends_generation_and_is_not_output(tiny_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, "a{2}X[a-z ]{5,30}", "--regex")
    record = generate_with(tiny_lm, smol_tokenizer, spec, seed=3, max_tokens=40, stop=("X",))
    assert record["finish_reason"] == "stop"
    assert record["output"] == "aa"
    # the stop string, not the model, cut the text short of the regex: the record says so
    assert record["valid"] is False
    assert any("--stop string 'X' ended the output at character 2" in w for w in record["warnings"])


def test_a_stop_string_after_a_complete_output_says_nothing(tiny_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, "a{2}(X[a-z ]{5,30})?", "--regex")
    assert generate_with(tiny_lm, smol_tokenizer, spec, seed=6, max_tokens=40)["output"].startswith("aaX ")
    record = generate_with(tiny_lm, smol_tokenizer, spec, seed=6, max_tokens=40, stop=("X",))
    assert record["output"] == "aa" and record["valid"] is True and record["finish_reason"] == "stop"
    assert not any("--stop" in w for w in record["warnings"])


def test_greedy_is_deterministic_and_seeded_sampling_reproducible(tiny_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, "[a-z]{4,8}", "--regex")
    greedy = {generate_with(tiny_lm, smol_tokenizer, spec, seed=s, temperature=0)["output"] for s in range(3)}
    assert len(greedy) == 1
    a = generate_with(tiny_lm, smol_tokenizer, spec, seed=7)["output"]
    b = generate_with(tiny_lm, smol_tokenizer, spec, seed=7)["output"]
    assert a == b
