"""Jump-forward decoding: the same outputs as the plain loop, fewer forward passes.

The tiny random model is the adversary: it rarely writes the canonical tokenization of
forced text, so drafts are often rejected half way, and outputs must still match.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgcli import backends
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.engine.decode import Finished, decode
from sgcli.engine.forced import draft_tokens
from sgcli.engine.sampling import SamplingParams

CAPITAL = Path(__file__).resolve().parent.parent / "examples" / "capital.json"
CITY = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "population": {"type": "integer"},
        "country": {"enum": ["France", "Germany"]},
    },
    "required": ["name", "population", "country"],
}
SPECS = {
    "schema-compact": ConstraintSpec(
        Kind.JSON_SCHEMA, json.dumps(CITY), "t", json_options=JsonOptions(whitespace="compact")
    ),
    "schema-flexible": ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(CITY), "t"),
    "regex-literal": ConstraintSpec(Kind.REGEX, "The answer is (yes|no), because [a-z ]{1,20}\\.", "--regex"),
    # both choices share a prefix that ends inside a token ("internationalization" ...)
    "choice-mid-token": ConstraintSpec(
        Kind.CHOICE, "", "--choice", choices=("internationalization station", "internationalization platform")
    ),
}


def jumping_backends() -> list[str]:
    names = [n for n in backends.backend_names() if backends.get_backend(n).capabilities.jump_forward]
    return [n for n in names if backends.get_backend(n).unavailable_reason() is None]


def run(lm, compiled, prompt_ids, **kw) -> Finished:
    params = kw.pop("params", SamplingParams())
    events = decode(lm, prompt_ids, compiled, params=params, max_tokens=kw.pop("max_tokens", 48), **kw)
    return [e for e in events if isinstance(e, Finished)][0]


def test_backends_that_report_forced_bytes_declare_it():
    assert {"xgrammar", "llguidance"} <= set(jumping_backends())
    assert not backends.get_backend("outlines_core").capabilities.jump_forward


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_same_output_as_the_plain_loop_on_the_random_model(tiny_lm, smol_tokenizer, backend, name, temperature):
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    compiled, _ = backends.compile_for(backend, SPECS[name], vocab)
    prompt = smol_tokenizer.encode("Name a city, its population and its country:")
    params = SamplingParams(temperature=temperature, seed=7)
    plain = run(tiny_lm, compiled, prompt, params=params, jump_forward=False)
    jumped = run(tiny_lm, compiled, prompt, params=params, jump_forward=True)
    assert (jumped.output, jumped.token_ids, jumped.finish_reason) == (
        plain.output,
        plain.token_ids,
        plain.finish_reason,
    )
    assert jumped.grammar_complete == plain.grammar_complete
    assert plain.forced_tokens == 0
    # every token comes from its own pass unless jump-forward appended it; the last pass may end on a stop token
    assert jumped.forward_passes + jumped.forced_tokens in (len(jumped.token_ids), len(jumped.token_ids) + 1)
    assert plain.forward_passes in (len(plain.token_ids), len(plain.token_ids) + 1)


def test_forced_tokens_are_counted_and_save_passes(tiny_lm, smol_tokenizer):
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    compiled, _ = backends.compile_for("xgrammar", SPECS["regex-literal"], vocab)
    prompt = smol_tokenizer.encode("Yes or no?")
    jumped = run(tiny_lm, compiled, prompt)
    plain = run(tiny_lm, compiled, prompt, jump_forward=False)
    assert jumped.output == plain.output and jumped.forced_tokens > 0
    assert jumped.forward_passes == plain.forward_passes - jumped.forced_tokens


def test_no_drafts_for_a_backend_without_forced_bytes(tiny_lm, smol_tokenizer):
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    compiled, _ = backends.compile_for("outlines_core", SPECS["regex-literal"], vocab)
    f = run(tiny_lm, compiled, smol_tokenizer.encode("Yes or no?"))
    assert f.forced_tokens == 0 and f.forward_passes >= len(f.token_ids)


def _spell(vocab, ids) -> bytes:
    return b"".join(vocab.tokens[i] for i in ids)


def test_draft_continues_a_token_cut_mid_word(smol_tokenizer):
    vocab = smol_tokenizer.vocab
    previous = smol_tokenizer.encode("inter")[-1]
    draft = draft_tokens(vocab, previous, b"nationalization station", 50)
    assert _spell(vocab, draft) == b"nationalization station"


def test_draft_retokenizes_the_boundary_but_keeps_the_previous_token(smol_tokenizer):
    vocab = smol_tokenizer.vocab
    (quote,) = smol_tokenizer.encode('"')
    draft = draft_tokens(vocab, quote, b'name": "', 50)
    assert _spell(vocab, [quote] + draft) == b'"name": "'
    assert draft == smol_tokenizer.encode('"name": "')[1:] or draft == smol_tokenizer.encode('name": "')


def test_draft_stops_before_a_partial_character_and_respects_the_limit(smol_tokenizer):
    vocab = smol_tokenizer.vocab
    forced = "café".encode()[:-1]  # ends inside 'é'
    assert _spell(vocab, draft_tokens(vocab, None, forced, 50)) == b"caf"
    assert len(draft_tokens(vocab, None, b"a b c d e f g h", 3)) == 3
    assert draft_tokens(vocab, None, b"", 5) == []


def test_drafts_learn_how_the_model_spells_forced_text(smol_tokenizer):
    """The tokenizer has `":"` as one token; a model that wrote `":` there gets `":`, `"` drafted next time."""
    from sgcli.engine.forced import Spellings

    vocab = smol_tokenizer.vocab
    (whole,) = smol_tokenizer.encode('":"')
    (part,) = smol_tokenizer.encode('":')
    (quote,) = smol_tokenizer.encode('"')
    spellings = Spellings(vocab)
    forced = b'capital":"'
    assert draft_tokens(vocab, None, forced, 50, spellings)[-1] == whole  # the tokenizer's spelling
    spellings.turned_down(whole, part)  # the model wrote `":` where the draft had `":"`
    respelled = draft_tokens(vocab, None, forced, 50, spellings)
    assert respelled[-2:] == [part, quote] and _spell(vocab, respelled) == forced
    assert len(draft_tokens(vocab, None, forced, 2, spellings)) == 2  # the limit still holds
    spellings.turned_down(part, whole)  # and then it wrote `":"` whole after all: forgotten
    assert draft_tokens(vocab, None, forced, 50, spellings)[-1] == whole
    (other,) = smol_tokenizer.encode("x")
    spellings.turned_down(whole, other)  # not a prefix of the drafted token: nothing learned
    assert spellings.learned == {}


def test_think_budget_forces_the_end_marker_then_the_constraint(tiny_lm, smol_tokenizer):
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    compiled, _ = backends.compile_for("xgrammar", SPECS["choice-mid-token"], vocab)
    prompt = smol_tokenizer.encode("Think, then answer.")
    f = run(tiny_lm, compiled, prompt, think_end="</think>", think_budget=5, max_tokens=64)
    assert f.think_forced and f.finish_reason == "stop" and f.grammar_complete
    assert f.output in ("internationalization station", "internationalization platform")
    marker = len(smol_tokenizer.encode("</think>"))
    assert _spell(vocab, f.token_ids[5 : 5 + marker]) == b"</think>" and "</think>" not in f.reasoning
    assert _spell(vocab, f.token_ids[5 + marker :]).decode() == f.output


def test_think_budget_zero_thinks_not_at_all(tiny_lm, smol_tokenizer):
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    compiled, _ = backends.compile_for("llguidance", SPECS["regex-literal"], vocab)
    f = run(tiny_lm, compiled, smol_tokenizer.encode("Go."), think_end="</think>", think_budget=0)
    assert f.think_forced and f.output.startswith("The answer is ")


@pytest.fixture(scope="module")
def smol_lm():
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model

    return load_model(resolve_model(None), device="cpu")


@pytest.mark.model
@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_default_model_writes_the_same_json_in_fewer_passes(smol_lm, smol_tokenizer, backend):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, CAPITAL.read_text(), "capital.json")
    compiled, _ = backends.compile_for(backend, spec, smol_tokenizer.vocab.padded(smol_lm.logits_width))
    text, _ = smol_tokenizer.render_chat([{"role": "user", "content": "What is the capital of France?"}])
    prompt = smol_tokenizer.prompt_ids(text, templated=True)
    plain = run(smol_lm, compiled, prompt, jump_forward=False, max_tokens=80)
    jumped = run(smol_lm, compiled, prompt, max_tokens=80)
    assert (jumped.output, jumped.token_ids) == (plain.output, plain.token_ids)
    assert jumped.forced_tokens > 0 and jumped.forward_passes == plain.forward_passes - jumped.forced_tokens
    assert set(json.loads(jumped.output)) == {"country", "capital"}


@pytest.mark.model
def test_reasoning_with_a_think_budget_answers(run_cli):
    schema = CAPITAL
    result = run_cli(
        "generate",
        "--schema",
        schema,
        "--reasoning",
        "--think-budget",
        "16",
        "--json",
        "-n",
        "120",
        "Capital of France?",
    )
    record = json.loads(result.stdout)
    assert record["think_budget"] == {"tokens": 16, "forced_end": True}
    assert record["reasoning"] and record["output"].strip() and record["valid"], record
    assert result.exit_code == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--think-budget", "8"], "--think-budget needs --reasoning"),
        (["--reasoning", "--think-budget", "-1"], "0 or more"),
    ],
)
def test_think_budget_flag_errors_before_any_model_loads(run_cli, args, message):
    result = run_cli("generate", "--regex", "a", *args, "x")
    assert result.exit_code == 2 and message in result.stderr


class _StopsAtCall:
    """A runtime that wraps another, without an output head, whose `n`-th pass strongly prefers the
    stop token (a model that ends while still thinking)."""

    def __init__(self, runtime, stop_id: int, n: int):
        self.runtime, self.stop_id, self.n, self.calls = runtime, stop_id, n, 0
        self.impl, self.module, self.supports = runtime.impl, runtime.module, runtime.supports

    def head(self):
        return None  # the loop takes the model's own logits (`logits`)

    def new_cache(self):
        return self.runtime.new_cache()

    def logits(self, input_ids, cache, keep):
        logits, cache = self.runtime.logits(input_ids, cache, keep)
        self.calls += 1
        if self.calls == self.n:
            logits[0, -1, self.stop_id] = 1e4
        return logits, cache


def test_a_stop_while_thinking_under_a_budget_forces_the_marker(tiny_lm, smol_tokenizer):
    from dataclasses import replace

    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    stop_id = vocab.stop_ids[0]
    compiled, _ = backends.compile_for("xgrammar", SPECS["choice-mid-token"], vocab)
    prompt = smol_tokenizer.encode("Think, then answer.")
    stopping = replace(tiny_lm, runtime=_StopsAtCall(tiny_lm.runtime, stop_id, 3))
    f = run(stopping, compiled, prompt, think_end="</think>", think_budget=50, max_tokens=64)
    assert f.think_forced and f.output in SPECS["choice-mid-token"].choices and f.error is None
    marker = len(smol_tokenizer.encode("</think>"))
    assert stop_id not in f.token_ids  # two thoughts, the stop token dropped, then the marker
    assert _spell(vocab, f.token_ids[2 : 2 + marker]) == b"</think>"
    stopping = replace(tiny_lm, runtime=_StopsAtCall(tiny_lm.runtime, stop_id, 3))
    unbudgeted = run(stopping, compiled, prompt, think_end="</think>", max_tokens=64)
    assert unbudgeted.finish_reason == "stop" and "before the end-of-thinking marker" in unbudgeted.error
