"""Backtracking at the schema checker's dead ends (issue 28; sgcli.engine.sequence, sgcli.engine.decode).

With xgrammar, `uniqueItems` is left to sgcli's checker, which refuses the closing quote of an item
already in the array: after `["b","a","a` nothing is allowed. The tiny random model at temperature 1
writes itself into that corner on most seeds; with backtracking the last tokens are undone and
resampled, so every output is valid; without it (a runtime whose cache cannot crop) the record says
why it did not backtrack.
"""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest

from sgcli.backends import compile_for
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.engine import sequence
from sgcli.engine.decode import decode
from sgcli.engine.sampling import SamplingParams
from sgcli.engine.sequence import MAX_BACKTRACKS, Finished, TokenEvent
from sgcli.tokenizers.vocab import IncrementalDetokenizer

SEEDS = range(8)
UNIQUE = {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "minItems": 2}
HOPELESS = {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True, "minItems": 3}  # no valid array


def spec_of(schema) -> ConstraintSpec:
    return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json", json_options=JsonOptions("compact"))


@pytest.fixture(scope="module")
def compiled(tiny_lm, smol_tokenizer):
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    return {
        name: compile_for("xgrammar", spec_of(s), vocab)[0] for name, s in (("unique", UNIQUE), ("hopeless", HOPELESS))
    }


def run(lm, compiled, seed: int, max_tokens: int = 60) -> tuple[list[TokenEvent], Finished]:
    prompt = compiled.vocab.encode("Answer:")
    events = list(
        decode(lm, prompt, compiled, params=SamplingParams(temperature=1.0, seed=seed), max_tokens=max_tokens)
    )
    assert isinstance(events[-1], Finished)
    return events[:-1], events[-1]


def text_of(vocab, ids: list[int]) -> str:
    detok = IncrementalDetokenizer(vocab)
    return "".join(detok.feed(i) for i in ids) + detok.flush()


def test_without_cropping_dead_ends_are_errors_that_say_why(tiny_lm, compiled, monkeypatch):
    monkeypatch.setattr(tiny_lm.runtime, "supports", dataclasses.replace(tiny_lm.runtime.supports, crop=False))
    results = [run(tiny_lm, compiled["unique"], seed)[1] for seed in SEEDS]
    errors = [f for f in results if f.finish_reason == "error"]
    assert len(errors) >= len(SEEDS) // 2  # the schema dead-ends on most seeds
    for f in errors:
        assert f.error.startswith("dead end, not backtracked (this model's KV cache cannot be cropped)"), f.error
        assert "the schema allows no continuation here" in f.error and f.backtracks == 0


def test_backtracking_makes_every_seed_end_valid(tiny_lm, compiled):
    undone = 0
    for seed in SEEDS:
        _, f = run(tiny_lm, compiled["unique"], seed)
        assert (f.finish_reason, f.error) == ("stop", None), (seed, f.output, f.error)
        jsonschema.validate(json.loads(f.output), UNIQUE)
        assert f.output == text_of(compiled["unique"].vocab, f.token_ids)  # the kept tokens' text, exactly
        undone += f.backtracks
    assert undone >= len(SEEDS) // 2  # it did go back (the same seeds dead-end without it)


def test_streamed_text_is_never_retracted(tiny_lm, compiled):
    backtracked = 0
    for seed in SEEDS:
        events, f = run(tiny_lm, compiled["unique"], seed)
        assert "".join(e.text for e in events) == f.output  # only appended, never text that was undone
        backtracked += f.backtracks > 0
    assert backtracked


def test_a_hopeless_schema_ends_at_the_bound_with_the_documented_error(tiny_lm, compiled):
    for seed in SEEDS[:3]:
        events, f = run(tiny_lm, compiled["hopeless"], seed)
        assert f.finish_reason == "error" and f.backtracks == MAX_BACKTRACKS, (f.backtracks, f.error)
        assert f.error.startswith(f"backtracking gave up after {MAX_BACKTRACKS} undone tokens"), f.error
        assert "(at /" in f.error  # where, as the checker's JSON pointer
        # no loop: a pass per token ever taken (kept or undone) and per undone token's re-fed predecessor
        assert f.forward_passes <= 1 + len(f.token_ids) + 2 * MAX_BACKTRACKS
        assert "".join(e.text for e in events) == f.output


def test_backtracking_never_undoes_text_already_streamed(tiny_lm, compiled, monkeypatch):
    """With a window of 1 token, a dead end that needs to go back further gives up, saying why, and
    what was streamed is still exactly the start of the output."""
    monkeypatch.setattr(sequence, "BACKTRACK_WINDOW", 1)
    monkeypatch.setattr(sequence, "MAX_BACKTRACKS", 1000)
    reasons = set()
    for seed in SEEDS[:4]:
        events, f = run(tiny_lm, compiled["hopeless"], seed)
        assert f.finish_reason == "error"
        reasons.add(f.error.split(" (at ")[0].split(": ", 1)[-1])
        streamed = "".join(e.text for e in events)
        assert streamed == f.output
    assert reasons == {"the text before here was already streamed"}, reasons


def test_records_count_backtracks(tiny_lm, smol_tokenizer):
    from helpers import generate_with

    from sgcli.records import GenerationRecord

    records = [generate_with(tiny_lm, smol_tokenizer, spec_of(UNIQUE), "xgrammar", seed=s) for s in SEEDS[:4]]
    for r in records:
        GenerationRecord.model_validate(r)
        assert r["finish_reason"] == "stop" and r["valid"], r["errors"]
    assert sum(r["usage"]["backtracks"] for r in records) > 0


PROMPTS = ("Answer:", "Reply:", "List:", "Say:", "Go:", "Now:", "Then:", "So:")


def batched(lm, compiled, prompts, seed: int, batch_size: int, **kw) -> dict[int, Finished]:
    from sgcli.engine.batching import decode_batch

    params = SamplingParams(temperature=1.0, seed=seed)
    return dict(decode_batch(lm, prompts, compiled, params=params, max_tokens=60, batch_size=batch_size, **kw))


@pytest.mark.parametrize("jump_forward", [True, False])
def test_batched_rows_backtrack_as_the_single_stream_does(tiny_lm, compiled, jump_forward, monkeypatch):
    """A row undoes its token by masking its own cache columns and feeding the token before it
    again in a step the other rows share: each row ends exactly as its prompt does alone, and
    after each undo the row attends to exactly the tokens it kept, less the one fed again."""
    from sgcli.engine.batching import KVBatch

    undo, masked = KVBatch.backtrack, []

    def checked(self, r):
        undo(self, r)
        row = self.rows[r]
        live = int(self.mask[r].sum())
        assert live == self.pos[r] == len(row.prompt_ids) + len(row.seq.ids) - len(self.last[r])
        masked.append(live)

    monkeypatch.setattr(KVBatch, "backtrack", checked)
    c = compiled["unique"]
    prompts = [c.vocab.encode(p) for p in PROMPTS]
    got = batched(tiny_lm, c, prompts, seed=3, batch_size=3, jump_forward=jump_forward)
    assert sorted(got) == list(range(len(prompts)))
    for i, f in got.items():
        assert (f.finish_reason, f.error) == ("stop", None), (i, f.output, f.error)
        jsonschema.validate(json.loads(f.output), UNIQUE)
        assert f.output == text_of(c.vocab, f.token_ids)
        alone = list(
            decode(
                tiny_lm,
                prompts[i],
                c,
                params=SamplingParams(temperature=1.0, seed=3),
                max_tokens=60,
                jump_forward=jump_forward,
            )
        )[-1]
        assert (f.output, f.backtracks) == (alone.output, alone.backtracks), i
    assert sum(f.backtracks for f in got.values()) >= len(prompts) // 2  # the dead end is common
    assert len(masked) == sum(f.backtracks for f in got.values())


def test_a_hopeless_batched_row_ends_at_the_bound_and_the_others_are_answered(tiny_lm, compiled):
    prompts = [compiled["hopeless"].vocab.encode(p) for p in PROMPTS[:4]]
    got = batched(tiny_lm, compiled["hopeless"], prompts, seed=1, batch_size=4)
    assert sorted(got) == [0, 1, 2, 3]
    for f in got.values():
        assert f.finish_reason == "error" and f.error.startswith("backtracking gave up"), f.error
        assert 0 < f.backtracks <= MAX_BACKTRACKS


def test_the_native_forward_backtracks_as_transformers_does(tiny_lm, compiled, tmp_path):
    """sgcli's own KV cache crops the undone columns as transformers' does: the same outputs."""
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model

    tiny_lm.model.save_pretrained(tmp_path)
    native = load_model(resolve_model(str(tmp_path)), device="cpu", impl="native")
    assert native.impl == "native" and native.runtime.supports.crop
    undone = 0
    for seed in SEEDS[:4]:
        _, theirs = run(tiny_lm, compiled["unique"], seed)
        _, ours = run(native, compiled["unique"], seed)
        assert (ours.finish_reason, ours.output, ours.backtracks) == ("stop", theirs.output, theirs.backtracks)
        undone += ours.backtracks
    assert undone
