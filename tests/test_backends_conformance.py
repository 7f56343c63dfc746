"""Every backend, every kind it declares: a random model as adversary never breaks the constraint.

The tiny random Llama tries whatever its mask lets through, so any hole in a backend's
mask (or in sgcli's adapter: wrong bytes, wrong stop ids) shows up as an invalid output.
Checks are independent of the backends: jsonschema, Python's `re`, plain comparison.
"""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

from sgcli.backends import get_backend
from sgcli.backends.base import allowed_ids, new_bitmask
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind

SEEDS = range(3)
BACKENDS = ["llguidance", "xgrammar", "outlines_core"]

# Only keywords every backend enforces (outlines-core drops minimum/maximum: see the warning test).
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "tags", "ok"],
    "additionalProperties": False,
}
REGEX = r"[a-z]{1,5}-[0-9]{2,4}"
GBNF = 'root ::= "[" num ("," num)? "]"\nnum ::= [0-9] [0-9]?\n'
GBNF_AS_RE = r"\[[0-9][0-9]?(,[0-9][0-9]?)?\]"
LARK = 'start: "<" WORD ">"\nWORD: /[a-z]{1,6}/\n'
LARK_AS_RE = r"<[a-z]{1,6}>"
LLG = json.dumps({"grammars": [{"lark_grammar": 'start: "id-" /[0-9]{2,3}/'}]})
LLG_AS_RE = r"id-[0-9]{2,3}"


def _schema_check(options):
    def check(out):
        jsonschema.validate(json.loads(out), PERSON)
        if options.whitespace == "compact":
            outside_strings = re.sub(r'"(?:[^"\\]|\\.)*"', '""', out)
            assert not any(ch.isspace() for ch in outside_strings), out

    return check


def _regex_check(pattern):
    return lambda out: re.fullmatch(pattern, out) or pytest.fail(f"{out!r} does not match {pattern}")


CHOICES = ("yes", "no", "maybe not")
CASES = {
    "schema-compact": (
        ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PERSON), "t", json_options=JsonOptions("compact")),
        _schema_check(JsonOptions("compact")),
        '{"name":"Al","age":7,"tags":["a"],"ok":true}',
    ),
    "schema-max-ws": (
        ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PERSON), "t", json_options=JsonOptions(max_whitespace=2)),
        _schema_check(JsonOptions()),
        '{ "name": "Al", "age": 7, "tags": [], "ok": false }',
    ),
    "regex": (ConstraintSpec(Kind.REGEX, REGEX, "--regex"), _regex_check(REGEX), "abc-123"),
    "choice": (
        ConstraintSpec(Kind.CHOICE, "\n".join(CHOICES), "--choice", choices=CHOICES),
        lambda out: out in CHOICES or pytest.fail(f"{out!r} is not a choice"),
        "maybe not",
    ),
    "ebnf": (ConstraintSpec(Kind.EBNF, GBNF, "g.gbnf"), _regex_check(GBNF_AS_RE), "[4,27]"),
    "lark": (ConstraintSpec(Kind.LARK, LARK, "g.lark"), _regex_check(LARK_AS_RE), "<abc>"),
    "llguidance": (ConstraintSpec(Kind.LLGUIDANCE, LLG, "g.llg.json"), _regex_check(LLG_AS_RE), "id-42"),
}


def _supported(backend: str, case: str) -> bool:
    from sgcli.backends import unsupported_reason

    return unsupported_reason(get_backend(backend), CASES[case][0]) is None


PAIRS = [(b, c) for b in BACKENDS for c in CASES if _supported(b, c)]
_compiled: dict = {}


def _compile(backend, case, vocab):
    key = (backend, case, id(vocab))
    if key not in _compiled:
        _compiled[key] = get_backend(backend).compile(CASES[case][0], vocab)
    return _compiled[key]


def test_every_backend_runs_every_kind_it_declares():
    declared = {b: {c for c in CASES if _supported(b, c)} for b in BACKENDS}
    assert declared["llguidance"] == set(CASES)
    assert declared["xgrammar"] == set(CASES) - {"llguidance"}
    assert declared["outlines_core"] == {"schema-compact", "schema-max-ws", "regex", "choice"}


@pytest.mark.parametrize("backend,case", PAIRS)
def test_random_model_outputs_satisfy_the_constraint(tiny_lm, smol_tokenizer, backend, case):
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import Done, PromptOptions, Request, Session

    _, check, _ = CASES[case]
    compiled = _compile(backend, case, smol_tokenizer.vocab.padded(tiny_lm.logits_width))
    for seed in SEEDS:
        session = Session(
            tiny_lm,
            smol_tokenizer,
            compiled,
            SamplingParams(temperature=1.0, seed=seed),
            300,
            (),
            PromptOptions(raw=True),
        )
        record = next(e.record for e in session.stream(Request(seed, "Answer:")) if isinstance(e, Done))
        assert record["finish_reason"] == "stop", (backend, seed, record)
        assert record["backend"] == backend and record["valid"], record
        check(record["output"])


@pytest.mark.parametrize("backend,case", PAIRS)
def test_mask_and_accept_agree(smol_tokenizer, backend, case):
    """Along a valid text: its token is in the mask and accepted; a token outside the mask is refused;
    a token inside it is accepted. The end of the text is a place where stopping is allowed."""
    vocab = smol_tokenizer.vocab
    compiled = _compile(backend, case, vocab)
    ids = vocab.encode(CASES[case][2])
    rng = np.random.default_rng(0)
    bitmask = new_bitmask(len(vocab))
    for step in range(len(ids) + 1):
        matcher = compiled.matcher()
        for t in ids[:step]:
            assert matcher.accept(t)
        matcher.fill_mask(bitmask)
        allowed = allowed_ids(bitmask, len(vocab))
        if step < len(ids):
            assert ids[step] in allowed, (step, vocab.tokens[ids[step]])
        else:
            assert matcher.can_stop() and set(vocab.stop_ids) <= set(allowed.tolist())
        forbidden = np.setdiff1d(np.arange(len(vocab)), allowed)
        if forbidden.size:
            bad = int(rng.choice(forbidden))
            assert not matcher.accept(bad) and matcher.error, (step, bad)
        probe = compiled.matcher()
        for t in ids[:step]:
            probe.accept(t)
        assert probe.accept(int(rng.choice(allowed))), step


@pytest.mark.parametrize("backend", BACKENDS)
def test_rollback_restores_the_mask(smol_tokenizer, backend):
    vocab = smol_tokenizer.vocab
    compiled = _compile(backend, "regex", vocab)
    ids = vocab.encode("abc-123")
    matcher = compiled.matcher()
    before, after = new_bitmask(len(vocab)), new_bitmask(len(vocab))
    matcher.accept(ids[0])
    matcher.fill_mask(before)
    for t in ids[1:]:
        assert matcher.accept(t)
    matcher.rollback(len(ids) - 1)
    matcher.fill_mask(after)
    assert np.array_equal(before, after)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_stop_id_ends_a_complete_match(smol_tokenizer, backend):
    vocab = smol_tokenizer.vocab
    for stop in vocab.stop_ids:
        matcher = _compile(backend, "regex", vocab).matcher()
        for t in vocab.encode("abc-12"):  # complete, yet it could go on to "abc-1234"
            assert matcher.accept(t)
        assert matcher.can_stop() and not matcher.is_terminated()
        assert matcher.accept(stop)
        assert matcher.is_terminated()


def test_backends_name_what_they_weaken(smol_tokenizer):
    """A keyword a backend does not enforce is a warning at its JSON pointer, never silence."""
    schema = {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "minimum": 0, "maximum": 130},
            "code": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 4},
        },
    }
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json")
    pointers = {b: {w.pointer for w in get_backend(b).compile(spec, smol_tokenizer.vocab).warnings} for b in BACKENDS}
    assert pointers["outlines_core"] == {
        "/properties/age/minimum",
        "/properties/age/maximum",
        "/properties/code/pattern",
    }
    assert pointers["xgrammar"] == {"/properties/code/maxLength"}
    assert pointers["llguidance"] == set()
