"""Batched decoding (sgcli.engine.batching) against the single-stream loop it must agree with.

Random models are the adversary (conftest). `tiny_lm` is nearly deaf to its prompt, so every row
writes about the same thing; `sharp_lm` is the same shape with larger random weights, whose
outputs depend on the prompt, so rows of one batch differ in length, finish at different steps and
are refilled from the queue, which is what the KV splicing must survive; `any_lm` is `sharp_lm` on
transformers' runtime and on sgcli's native one (`sharp_native`). A batch's steps: test_batch_steps.
"""

from __future__ import annotations

import json

import batch_cases as cases
import pytest

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.engine.batching import BatchStats, decode_batch
from sgcli.engine.prefix import shared_prefixes
from sgcli.engine.session import Request


@pytest.mark.parametrize("backend", cases.json_backends())
def test_batch_equals_sequential_at_temperature_0(any_lm, smol_tokenizer, backend):
    session = cases.session_for(any_lm, smol_tokenizer, cases.json_spec(), backend)
    requests = cases.make_requests()
    expected = cases.sequential(session, requests)
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=4, stats=stats))
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in expected]
    assert set(got[0]["timings"]) == set(expected[0]["timings"])  # same record shape
    assert stats.reused_prefix_tokens > 0  # the shared system prompt was prefilled once
    session.jump_forward = True  # the single-stream default: same outputs, fewer forward passes
    assert [r["output"] for r in got] == [r["output"] for r in cases.sequential(session, requests)]
    lengths = {r["usage"]["completion_tokens"] for r in got}
    if backend != "none":  # unconstrained, a random model never picks EOS: every row runs to max_tokens
        assert len(lengths) > 3  # rows really ended at different steps


def test_batch_equals_sequential_on_the_conftest_adversary(tiny_lm, smol_tokenizer):
    session = cases.session_for(tiny_lm, smol_tokenizer, cases.json_spec(compact=False), max_tokens=80)
    requests = cases.make_requests()
    got = list(session.batch(requests, batch_size=8))
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in cases.sequential(session, requests)]


def test_sampled_rows_match_sequential_with_the_same_seed(sharp_lm, smol_tokenizer):
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec(compact=False), temperature=0.9)
    requests = cases.make_requests(cases.PROMPTS[:6])
    got = list(session.batch(requests, batch_size=3))
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in cases.sequential(session, requests)]


def test_records_come_back_in_input_order_with_refill(sharp_lm, smol_tokenizer):
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec())
    requests = cases.make_requests()
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=3, stats=stats))
    assert [r["id"] for r in got] == [r.id for r in requests]
    assert stats.row_steps > stats.steps  # several rows per forward pass
    assert stats.row_steps <= 3 * stats.steps  # never more than the batch size


def test_records_flush_as_soon_as_their_prefix_is_complete(sharp_lm, smol_tokenizer):
    """The first record is yielded while later rows are still decoding (not all at the end)."""
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec(), max_tokens=40)
    short = Request("short", "x")
    long_ones = [Request(f"long{i}", p) for i, p in enumerate(cases.PROMPTS[1:5])]
    stats = BatchStats()
    records = session.batch([short, *long_ones], batch_size=5, stats=stats)
    first = next(records)
    steps_at_first = stats.steps
    rest = list(records)
    assert first["id"] == "short" and [r["id"] for r in rest] == [r.id for r in long_ones]
    assert steps_at_first < stats.steps


def test_stop_strings_end_only_their_row(sharp_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, r"[a-z ]{1,60}", "test")
    session = cases.session_for(sharp_lm, smol_tokenizer, spec, stop=("e",), system=None)
    requests = cases.make_requests()
    expected = cases.sequential(session, requests)
    got = list(session.batch(requests, batch_size=4))
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in expected]
    by_stop = [r for r in got if r["finish_reason"] == "stop" and r["usage"]["completion_tokens"] < 60]
    assert by_stop and all("e" not in r["output"] for r in got)
    assert len({r["usage"]["completion_tokens"] for r in by_stop}) > 1  # each row stopped at its own step


def test_one_rows_error_does_not_end_the_others(sharp_lm, smol_tokenizer):
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec())
    bad = Request("bad", messages=[{"role": "user", "content": "hi"}, {"role": 3, "content": "x"}])
    requests = [Request("a", "one"), bad, Request("b", "two"), Request("c", "three")]
    got = list(session.batch(requests, batch_size=2))
    assert [r["id"] for r in got] == ["a", "bad", "b", "c"]
    assert got[1]["finish_reason"] == "error" and not got[1]["valid"] and got[1]["errors"]
    assert set(got[1]) == set(got[0])  # the same record shape as a decoded row
    good = [cases.comparable(r) for r in cases.sequential(session, [requests[0], *requests[2:]])]
    assert [cases.comparable(r) for r in got if r["id"] != "bad"] == good


class _DeadEnd:
    """A matcher whose mask allows nothing after `after` accepted tokens: a grammar dead end."""

    def __init__(self, inner, after: int):
        self.inner, self.after, self.accepted, self.error = inner, after, 0, None

    def fill_mask(self, bitmask) -> None:
        self.inner.fill_mask(bitmask)
        if self.accepted >= self.after:
            bitmask.fill(0)
            self.error = "dead end injected by the test"

    def accept(self, token: int) -> bool:
        self.accepted += 1
        return self.inner.accept(token)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_grammar_dead_end_in_one_row_leaves_the_others(any_lm, smol_tokenizer):
    session = cases.session_for(any_lm, smol_tokenizer, cases.json_spec())
    requests = cases.make_requests(cases.PROMPTS[:6])
    expected = cases.sequential(session, requests)
    made = []
    plain = session.compiled.matcher

    def matcher():  # the third request's matcher (rows are admitted in input order) dead-ends
        made.append(_DeadEnd(plain(), after=5) if len(made) == 2 else plain())
        return made[-1]

    session.compiled.matcher = matcher
    got = list(session.batch(requests, batch_size=3))
    assert got[2]["finish_reason"] == "error" and got[2]["errors"][0] == "dead end injected by the test"
    assert got[2]["usage"]["completion_tokens"] == 5 and not got[2]["valid"]
    others = [cases.comparable(r) for i, r in enumerate(got) if i != 2]
    assert others == [cases.comparable(r) for i, r in enumerate(expected) if i != 2]


def test_a_row_that_finishes_early_leaves_the_rest_running(sharp_lm, smol_tokenizer):
    """Four rows together: the first to end leaves while the others keep decoding to their own ends."""
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec())
    requests = cases.make_requests(cases.PROMPTS[:4])
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=4, stats=stats))
    lengths = [r["usage"]["completion_tokens"] for r in got]
    assert min(lengths) < max(lengths) and all(r["finish_reason"] == "stop" for r in got)
    assert stats.steps >= max(lengths) - 1  # the batch ran until the longest row ended, not the first
    assert stats.row_steps < 4 * stats.steps  # an ended row costs no further row-steps
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in cases.sequential(session, requests)]


def test_rows_that_all_end_at_their_first_token_still_admit_the_rest(sharp_lm, smol_tokenizer):
    """A grammar that forces its whole output ends every row at the prefill: each wave leaves the
    batch empty, and the waiting requests must still be admitted (a batch once stopped there)."""
    spec = ConstraintSpec(Kind.REGEX, "done", "test")
    session = cases.session_for(sharp_lm, smol_tokenizer, spec, "llguidance")
    session.jump_forward = True
    requests = cases.make_requests(cases.PROMPTS[:7])
    got = list(session.batch(requests, batch_size=2))
    assert [r["id"] for r in got] == [r.id for r in requests]
    assert {r["output"] for r in got} == {"done"} and all(r["valid"] for r in got)


def test_reasoning_rows_match_sequential(sharp_lm, smol_tokenizer):
    """Reasoning mode per row: free text until the marker, then the grammar. The marker is one
    common letter so that rows leave thinking at different steps."""
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec(), max_tokens=50)
    session.think_end = "e"
    requests = cases.make_requests()
    got = list(session.batch(requests, batch_size=4))
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in cases.sequential(session, requests)]
    assert any(r["reasoning"] and r["output"] for r in got)


def test_shared_prefix_reuse_gives_identical_outputs(sharp_lm, smol_tokenizer):
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec())
    prompts = [session.render(r)[1] for r in cases.make_requests()]
    common = dict(params=session.params, max_tokens=40, batch_size=4)
    shared, fresh = BatchStats(), BatchStats()
    with_store = dict(decode_batch(sharp_lm, prompts, session.compiled, stats=shared, **common))
    without = dict(decode_batch(sharp_lm, prompts, session.compiled, share_prefix=False, stats=fresh, **common))
    assert {i: f.token_ids for i, f in with_store.items()} == {i: f.token_ids for i, f in without.items()}
    assert shared.reused_prefix_tokens > 0 and fresh.reused_prefix_tokens == 0
    assert shared.prefill_tokens < fresh.prefill_tokens


def test_shared_prefixes_finds_the_longest_head_per_prompt():
    a, b = [1] * 10 + [2, 3], [1] * 10 + [2, 4]
    c, d = [1] * 9 + [5, 6], [7, 8, 9]
    assert shared_prefixes([a, b, c, d]) == [11, 11, 9, 0]
    assert shared_prefixes([a, a]) == [11, 11]  # identical prompts keep one token to prefill
    assert shared_prefixes([a, b], minimum=20) == [0, 0]


@pytest.mark.model
def test_default_model_batch_equals_sequential(smol_tokenizer):
    session = cases.default_model_session(smol_tokenizer)
    requests = cases.make_requests(
        [f"What is the capital of {c}?" for c in ("France", "Japan", "Peru", "Kenya", "Italy")]
    )
    got = list(session.batch(requests, batch_size=4))
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in cases.sequential(session, requests)]
    assert all(r["valid"] for r in got)


def test_cli_batch_sizes_give_the_same_records(run_cli, tmp_path):
    """`generate --input` on the default model: batched records equal one-at-a-time records, in order."""
    lines = [json.dumps({"id": f"q{i}", "prompt": f"Say the number {i * 7}."}) for i in range(5)]
    lines.insert(1, json.dumps({"id": "bad", "messages": [{"role": "user", "content": 3}, {"content": "x"}]}))
    batch = tmp_path / "prompts.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    outs = {}
    for size in (1, 3, 32):
        result = run_cli("generate", "--regex", "[0-9]{1,3}", "--input", batch, "--batch-size", size, "--threads", 1)
        outs[size] = [json.loads(line) for line in result.stdout.splitlines()]
        assert result.exit_code == 1, result.output  # the bad line is an invalid record, not a crash
        # the rows the batch ran with: 32 asked for 5 requests is a batch of 5
        how = {1: "one request at a time", 3: "batch 3", 32: "batch 5"}[size] + ", 1 thread"
        assert f"tok/s) · {how}" in result.stderr, result.stderr  # the summary says what the batch ran with
    assert [r["id"] for r in outs[3]] == ["q0", "bad", "q1", "q2", "q3", "q4"]
    assert [cases.comparable(r) for r in outs[3]] == [cases.comparable(r) for r in outs[1]]
    assert [cases.comparable(r) for r in outs[32]] == [cases.comparable(r) for r in outs[1]]
    assert all(r["valid"] for r in outs[3] if r["id"] != "bad")


def test_cli_batch_size_flag_errors(run_cli, tmp_path):
    batch = tmp_path / "p.jsonl"
    batch.write_text('{"prompt": "hi"}\n')
    for args, message in (
        (("--input", batch, "--batch-size", "0"), "--batch-size must be at least 1"),
        (("--batch-size", "4", "hello"), "--batch-size needs --input"),
    ):
        result = run_cli("generate", "--regex", "a", *args)
        assert result.exit_code == 2 and message in result.output, result.output


def test_what_batching_does_not_do_is_said_not_skipped(sharp_lm, smol_tokenizer):
    """--think-budget is not implemented in batches: the session says so, and the CLI then decodes
    one request at a time with a note (never a batch that silently ignores the budget)."""
    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec())
    assert session.batch_unsupported() is None
    session.think_end, session.think_budget = "e", 3
    assert "--think-budget" in session.batch_unsupported()


def test_the_context_limits_rows_as_it_limits_single_requests(sharp_lm, smol_tokenizer, monkeypatch):
    """A prompt that leaves less room than --max-tokens gets fewer tokens with a warning, and one that
    fills the context gets an error record: the same records at batch size 3 as one at a time."""
    from sgcli.app.local import run_checked

    session = cases.session_for(sharp_lm, smol_tokenizer, cases.json_spec(), "none", max_tokens=20)
    requests = cases.make_requests(["Hi", "Largest planet?", "word " * 40, "x"])
    lengths = [len(session.render(r)[1]) for r in requests]
    monkeypatch.setattr(sharp_lm.model.config, "max_position_embeddings", lengths[1] + 5)
    got = list(session.batch(requests, batch_size=3))
    assert [cases.comparable(r) for r in got] == [cases.comparable(run_checked(session, r)) for r in requests]
    assert got[1]["usage"]["completion_tokens"] <= 5 and any("cut to 5" in w for w in got[1]["warnings"])
    assert got[2]["output"] is None and "longer than the model's context" in got[2]["errors"][0]
    assert got[0]["usage"]["completion_tokens"] > 5 and got[3]["finish_reason"] != "error"


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar", "outlines_core"])
def test_a_complete_output_at_the_budget_stops_in_a_batch_as_alone(tiny_lm, smol_tokenizer, backend):
    spec = ConstraintSpec(Kind.REGEX, "[0-9]", "--regex")
    session = cases.session_for(tiny_lm, smol_tokenizer, spec, backend, max_tokens=1)
    requests = cases.make_requests(cases.PROMPTS[:3])
    got = list(session.batch(requests, batch_size=3))
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in cases.sequential(session, requests)]
    assert {(r["finish_reason"], r["valid"]) for r in got} == {("stop", True)}
