"""The repetition guard (issue 29): an output stuck repeating one span ends early with
finish_reason "repetition", in the single-stream loop and in batch rows alike; normal JSON
(short runs, a few equal values, long lists of distinct items) never trips it."""

from __future__ import annotations

import json

import pytest

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.engine.repetition import (
    REPEAT_LONG_MIN_CHARS,
    REPEAT_LONG_MIN_COPIES,
    REPEAT_LONG_SPAN,
    REPEAT_MAX_SPAN,
    REPEAT_MIN_CHARS,
    REPEAT_MIN_COPIES,
    Repetition,
    find_repetition,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("john_" * 13, Repetition(0, "john_", 13)),  # 65 characters: the first past REPEAT_MIN_CHARS
        ('{"email": "' + "john_" * 20, Repetition(11, "john_", 20)),  # offset: where the loop began
        ('{"email": "john' + "_john" * 20, Repetition(11, "john_", 20)),  # the span read from where it starts
        ("{" + "\n" * 70, Repetition(1, "\n", 70)),  # runaway whitespace, whatever tokens spelled it
        ('{"a":1,' + " \n" * 40, Repetition(7, " \n", 40)),
        ("[" + '{"name":"Ann"},' * 8, Repetition(1, '{"name":"Ann"},', 8)),  # the same object, over and over
        ("x" * 10 + "ab" * 32, Repetition(10, "ab", 32)),
    ],
)
def test_a_loop_is_found_with_its_span_and_where_it_began(text, expected):
    assert find_repetition(text) == expected
    assert f"from character {expected.start}" in expected.message() and repr(expected.span) in expected.message()


UNREPEATED_129 = "".join(f"{i:03d}" for i in range(43))  # 129 characters, no shorter period
PEN_BOX = json.dumps({"description": "A box of twelve pens, blue ink", "quantity": 1})


@pytest.mark.parametrize(
    "text",
    [
        "[0, 0, 0]",
        '{"a": "aaaa", "b": [0, 0, 0, 0], "c": "zzzzzzzz"}',
        "a" * (REPEAT_MIN_CHARS - 1),  # one short of the run
        "0," * 31 + "0",  # 63 characters
        json.dumps(list(range(300))),  # long lists of distinct items
        json.dumps([f"item{i}" for i in range(60)]),
        json.dumps([{"name": n, "age": 30} for n in ("Ann", "Bob", "Cy", "Dee", "Eve", "Fay", "Gus", "Hal", "Ida")]),
        "abcdefghijklmnopqrstuvwxyz012345" * (REPEAT_MIN_COPIES - 1),  # a long span, one copy short
        "abcdefghijklmnopqrstuvwxyz0123456" * 7,  # a long span of 33: 231 characters, one copy short
        UNREPEATED_129 * 12,  # a span past REPEAT_LONG_SPAN: left to --max-tokens
        "[" + ",".join([PEN_BOX] * 3) + "]",  # three equal objects of 64 characters in a row
        json.dumps([{"name": chr(97 + i) * 3, "v": i} for i in range(40)]),  # equal keys, distinct values
        json.dumps({"description": " ".join(f"sentence {i} says something else about Paris." for i in range(40))}),
        "The quick brown fox jumps over the lazy dog. " * 1 + "Then it sleeps.",
        "",
    ],
)
def test_normal_text_is_not_a_loop(text):
    assert find_repetition(text) is None


def test_the_constants_agree_with_their_reasons():
    assert REPEAT_MIN_CHARS == 64  # lint W002's runaway probe (sgcli.lint.schema_checks.RUNAWAY_SPACES)
    from sgcli.lint.schema_checks import RUNAWAY_SPACES

    assert RUNAWAY_SPACES == REPEAT_MIN_CHARS
    assert REPEAT_MIN_COPIES * REPEAT_MAX_SPAN >= REPEAT_MIN_CHARS
    # the long spans' rule asks no fewer copies of a span of 33 than the short spans' does of 32
    assert -(-REPEAT_LONG_MIN_CHARS // (REPEAT_MAX_SPAN + 1)) == REPEAT_MIN_COPIES
    assert REPEAT_LONG_MIN_COPIES * REPEAT_LONG_SPAN >= REPEAT_LONG_MIN_CHARS
    assert len(UNREPEATED_129) == REPEAT_LONG_SPAN + 1 and len(PEN_BOX) == 64


# 40 copies of a name. xgrammar's mask allows every spelling of it (`a`, `an`, `ann`, ...), so each
# token is a choice the model makes and the loop is the model's to answer for. (llguidance allows only
# the canonical token of forced text: a loop the grammar forces token by token, leaving the model
# nothing to choose, is not flagged.)
LOOP = ConstraintSpec(Kind.REGEX, "(ann_){40}", "--regex")
BACKEND = "xgrammar"


def _session(lm, tokenizer, *, guard: bool, temperature: float = 0.0):
    from sgcli.backends import compile_for, get_backend
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Session

    if get_backend(BACKEND).unavailable_reason():
        pytest.skip(get_backend(BACKEND).unavailable_reason())
    compiled = compile_for(BACKEND, LOOP, tokenizer.vocab.padded(lm.logits_width))[0]
    params = SamplingParams(temperature=temperature, seed=3)
    return Session(lm, tokenizer, compiled, params, 256, (), PromptOptions(raw=True), repetition_guard=guard)


def _assert_caught(record: dict) -> None:
    assert record["finish_reason"] == "repetition" and record["valid"] is False, record
    assert any("repeats 'ann_'" in e and "from character 0" in e for e in record["errors"]), record["errors"]
    assert any("ended by the repetition guard" in e for e in record["errors"])
    assert record["output"].startswith("ann_" * (REPEAT_MIN_CHARS // 4))
    assert len(record["output"]) < len("ann_") * 40  # ended early, well before the grammar's end


def test_the_decode_loop_ends_a_loop_with_finish_reason_repetition(tiny_lm, smol_tokenizer):
    from sgcli.engine.session import Request
    from sgcli.records import GenerationRecord

    record = list(_session(tiny_lm, smol_tokenizer, guard=True).stream(Request(None, "Email:")))[-1].record
    _assert_caught(record)
    GenerationRecord.model_validate(record)  # "repetition" is a documented finish_reason
    off = list(_session(tiny_lm, smol_tokenizer, guard=False).stream(Request(None, "Email:")))[-1].record
    assert (off["finish_reason"], off["valid"], off["output"]) == ("stop", True, "ann_" * 40)


def test_batch_rows_hold_the_same_guard(tiny_lm, smol_tokenizer):
    from sgcli.engine.session import Request

    session = _session(tiny_lm, smol_tokenizer, guard=True)
    records = list(session.batch([Request(f"r{i}", p) for i, p in enumerate(("Email:", "Name:", "x"))], 3))
    assert len(records) == 3
    for record in records:
        _assert_caught(record)


def test_a_loop_the_grammar_forces_token_by_token_is_not_the_models(tiny_lm, smol_tokenizer):
    from sgcli.backends import compile_for
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    compiled = compile_for("llguidance", LOOP, smol_tokenizer.vocab.padded(tiny_lm.logits_width))[0]
    session = Session(tiny_lm, smol_tokenizer, compiled, SamplingParams(0.0), 256, (), PromptOptions(raw=True))
    record = list(session.stream(Request(None, "Email:")))[-1].record  # llguidance: one token allowed each time
    assert (record["finish_reason"], record["valid"], record["output"]) == ("stop", True, "ann_" * 40)


def test_the_flag_and_its_setting_reach_the_session(tiny_lm, smol_tokenizer, monkeypatch):
    from sgcli import config
    from sgcli.app.local import new_session
    from sgcli.backends import compile_for
    from sgcli.batch.requests import PromptOptions
    from sgcli.batch.sampling import SamplingParams

    compiled = compile_for("llguidance", LOOP, smol_tokenizer.vocab.padded(tiny_lm.logits_width))[0]
    for guard in (True, False):
        params = SamplingParams(repetition_guard=guard)
        assert new_session(tiny_lm, smol_tokenizer, compiled, params, PromptOptions()).repetition_guard is guard
    assert config.Config().get("repetition-guard", {"SGCLI_REPETITION_GUARD": "0"}) is False
    assert config.Config(file_values={"repetition-guard": False}).default_map({"generate": {"repetition_guard"}}) == {
        "generate": {"repetition_guard": False}
    }


def test_the_configuration_file_takes_a_boolean(tmp_path):
    from sgcli import config
    from sgcli.errors import UserError

    (tmp_path / "sgcli.toml").write_text("repetition-guard = false\n")
    assert config.load_config(tmp_path).get("repetition-guard", {}) is False
    (tmp_path / "sgcli.toml").write_text('repetition-guard = "no"\n')
    with pytest.raises(UserError, match="'repetition-guard' must be bool"):
        config.load_config(tmp_path)
