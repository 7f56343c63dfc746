"""Batched decoding (sgcli.engine.batching) against the single-stream loop it must agree with.

Random models are the adversary. `sharp_lm` (conftest) is nearly deaf to its prompt, so every row
writes about the same thing; `sharp_lm` below is the same shape with larger random weights, whose
outputs depend on the prompt, so rows of one batch differ in length, finish at different steps and
are refilled from the queue, which is what the KV splicing must survive.
"""

from __future__ import annotations

import json

import pytest

from sgcli.backends import backend_names, check_supports
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.engine.batching import BatchStats, decode_batch
from sgcli.engine.prefix import shared_prefixes
from sgcli.engine.sampling import SamplingParams
from sgcli.engine.session import PromptOptions, Request, Session

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "n": {"type": "integer", "minimum": 0, "maximum": 9999},
        "tags": {"type": "array", "items": {"enum": ["a", "bb", "ccc"]}, "maxItems": 4},
    },
    "required": ["name", "n", "tags"],
    "additionalProperties": False,
}
SYSTEM = "You are a careful assistant that answers with one JSON object and nothing else, ever."
PROMPTS = [
    "Capital of France?",
    "Name a colour.",
    "Describe a cat in detail, please, with tags",
    "x",
    "Tell me about the number seven and why it matters.",
    "Largest planet?",
    "Hi",
    "Write a JSON object about a dog named Rex who is four.",
    "One more question about the sea.",
    "Last one.",
]


@pytest.fixture(scope="module")
def sharp_lm(smol_tokenizer):
    from helpers import random_llama

    return random_llama(len(smol_tokenizer.vocab), "sharp-random", initializer_range=0.3)


@pytest.fixture(scope="module")
def sharp_native(smol_tokenizer):
    """`sharp_lm`'s weights in sgcli's own forward (its batches pack out padding and prefill joining
    rows inside their steps; transformers' take the other paths)."""
    from helpers import random_llama

    return random_llama(len(smol_tokenizer.vocab), "sharp-random", initializer_range=0.3, impl="native")


@pytest.fixture(params=["transformers", "native"])
def any_lm(request):
    """`sharp_lm` on either runtime, for the tests each batching path must pass."""
    return request.getfixturevalue("sharp_lm" if request.param == "transformers" else "sharp_native")


def _spec(compact: bool = True) -> ConstraintSpec:
    options = JsonOptions(whitespace="compact") if compact else JsonOptions(max_whitespace=2)
    return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(SCHEMA), "test", json_options=options)


def _session(lm, tokenizer, spec, backend="xgrammar", *, max_tokens=60, stop=(), temperature=0.0, system=SYSTEM):
    vocab = tokenizer.vocab.padded(lm.logits_width)
    compiled = check_supports(backend, spec).compile(spec, vocab)
    params = SamplingParams(temperature=temperature, seed=7)
    # Batched rows decode every token, so the records to match are the plain loop's (jump-forward off).
    options = PromptOptions(system=system)
    return Session(lm, tokenizer, compiled, params, max_tokens, tuple(stop), options, jump_forward=False)


def _sequential(session, requests) -> list[dict]:
    return [list(session.stream(r))[-1].record for r in requests]


def _comparable(record: dict) -> dict:
    """A record without its timings (the only fields allowed to differ between the two paths)."""
    return {k: v for k, v in record.items() if k != "timings"}


def _requests(prompts=PROMPTS) -> list[Request]:
    return [Request(f"r{i}", p) for i, p in enumerate(prompts)]


def _json_backends() -> list[str]:
    spec = _spec()
    names = []
    for name in backend_names():
        try:
            check_supports(name, spec)
        except Exception:  # a backend that cannot take this spec is not under test here
            continue
        names.append(name)
    return names


@pytest.mark.parametrize("backend", _json_backends())
def test_batch_equals_sequential_at_temperature_0(any_lm, smol_tokenizer, backend):
    session = _session(any_lm, smol_tokenizer, _spec(), backend)
    requests = _requests()
    expected = _sequential(session, requests)
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=4, stats=stats))
    assert [_comparable(r) for r in got] == [_comparable(r) for r in expected]
    assert set(got[0]["timings"]) == set(expected[0]["timings"])  # same record shape
    assert stats.reused_prefix_tokens > 0  # the shared system prompt was prefilled once
    session.jump_forward = True  # the single-stream default: same outputs, fewer forward passes
    assert [r["output"] for r in got] == [r["output"] for r in _sequential(session, requests)]
    lengths = {r["usage"]["completion_tokens"] for r in got}
    if backend != "none":  # unconstrained, a random model never picks EOS: every row runs to max_tokens
        assert len(lengths) > 3  # rows really ended at different steps


def test_batch_equals_sequential_on_the_conftest_adversary(tiny_lm, smol_tokenizer):
    session = _session(tiny_lm, smol_tokenizer, _spec(compact=False), max_tokens=80)
    requests = _requests()
    got = list(session.batch(requests, batch_size=8))
    assert [_comparable(r) for r in got] == [_comparable(r) for r in _sequential(session, requests)]


@pytest.mark.parametrize("chunk", [0, 5, 512])
@pytest.mark.parametrize("system", [SYSTEM, None])
def test_rows_prefilled_in_chunks_beside_the_batch_give_the_outputs_of_one_at_a_time(
    sharp_native, smol_tokenizer, monkeypatch, chunk, system
):
    """Admitted rows are prefilled inside the batch's steps (`PREFILL_CHUNK` prompt tokens a step,
    one pass with the running rows) or, at 0, in passes of their own: the records are the
    single-stream loop's either way, shared head or none."""
    from sgcli.engine import batching

    monkeypatch.setattr(batching, "PREFILL_CHUNK", chunk)
    session = _session(sharp_native, smol_tokenizer, _spec(), system=system)
    requests = _requests()
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=3, stats=stats))
    expected = _sequential(session, requests)
    passes = [(r["usage"].pop("forward_passes"), e["usage"].pop("forward_passes")) for r, e in zip(got, expected)]
    assert [_comparable(r) for r in got] == [_comparable(r) for r in expected]
    if chunk == 5:  # every prompt is longer than a chunk: prefilled over several steps, beside running rows
        assert stats.prefill_passes > len(requests)
        assert stats.joint_steps > 0
        assert all(mine > theirs for mine, theirs in passes)  # each chunk a pass the record counts
    else:
        assert all(mine == theirs for mine, theirs in passes)
    if chunk == 0:
        assert stats.joint_steps == 0


def test_sampled_rows_match_sequential_with_the_same_seed(sharp_lm, smol_tokenizer):
    session = _session(sharp_lm, smol_tokenizer, _spec(compact=False), temperature=0.9)
    requests = _requests(PROMPTS[:6])
    got = list(session.batch(requests, batch_size=3))
    assert [_comparable(r) for r in got] == [_comparable(r) for r in _sequential(session, requests)]


def test_records_come_back_in_input_order_with_refill(sharp_lm, smol_tokenizer):
    session = _session(sharp_lm, smol_tokenizer, _spec())
    requests = _requests()
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=3, stats=stats))
    assert [r["id"] for r in got] == [r.id for r in requests]
    assert stats.row_steps > stats.steps  # several rows per forward pass
    assert stats.row_steps <= 3 * stats.steps  # never more than the batch size


def test_records_flush_as_soon_as_their_prefix_is_complete(sharp_lm, smol_tokenizer):
    """The first record is yielded while later rows are still decoding (not all at the end)."""
    session = _session(sharp_lm, smol_tokenizer, _spec(), max_tokens=40)
    short = Request("short", "x")
    long_ones = [Request(f"long{i}", p) for i, p in enumerate(PROMPTS[1:5])]
    stats = BatchStats()
    records = session.batch([short, *long_ones], batch_size=5, stats=stats)
    first = next(records)
    steps_at_first = stats.steps
    rest = list(records)
    assert first["id"] == "short" and [r["id"] for r in rest] == [r.id for r in long_ones]
    assert steps_at_first < stats.steps


def test_stop_strings_end_only_their_row(sharp_lm, smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, r"[a-z ]{1,60}", "test")
    session = _session(sharp_lm, smol_tokenizer, spec, stop=("e",), system=None)
    requests = _requests()
    expected = _sequential(session, requests)
    got = list(session.batch(requests, batch_size=4))
    assert [_comparable(r) for r in got] == [_comparable(r) for r in expected]
    by_stop = [r for r in got if r["finish_reason"] == "stop" and r["usage"]["completion_tokens"] < 60]
    assert by_stop and all("e" not in r["output"] for r in got)
    assert len({r["usage"]["completion_tokens"] for r in by_stop}) > 1  # each row stopped at its own step


def test_one_rows_error_does_not_end_the_others(sharp_lm, smol_tokenizer):
    session = _session(sharp_lm, smol_tokenizer, _spec())
    bad = Request("bad", messages=[{"role": "user", "content": "hi"}, {"role": 3, "content": "x"}])
    requests = [Request("a", "one"), bad, Request("b", "two"), Request("c", "three")]
    got = list(session.batch(requests, batch_size=2))
    assert [r["id"] for r in got] == ["a", "bad", "b", "c"]
    assert got[1]["finish_reason"] == "error" and not got[1]["valid"] and got[1]["errors"]
    assert set(got[1]) == set(got[0])  # the same record shape as a decoded row
    good = [_comparable(r) for r in _sequential(session, [requests[0], *requests[2:]])]
    assert [_comparable(r) for r in got if r["id"] != "bad"] == good


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
    session = _session(any_lm, smol_tokenizer, _spec())
    requests = _requests(PROMPTS[:6])
    expected = _sequential(session, requests)
    made = []
    plain = session.compiled.matcher

    def matcher():  # the third request's matcher (rows are admitted in input order) dead-ends
        made.append(_DeadEnd(plain(), after=5) if len(made) == 2 else plain())
        return made[-1]

    session.compiled.matcher = matcher
    got = list(session.batch(requests, batch_size=3))
    assert got[2]["finish_reason"] == "error" and got[2]["errors"][0] == "dead end injected by the test"
    assert got[2]["usage"]["completion_tokens"] == 5 and not got[2]["valid"]
    others = [_comparable(r) for i, r in enumerate(got) if i != 2]
    assert others == [_comparable(r) for i, r in enumerate(expected) if i != 2]


def test_a_row_that_finishes_early_leaves_the_rest_running(sharp_lm, smol_tokenizer):
    """Four rows together: the first to end leaves while the others keep decoding to their own ends."""
    session = _session(sharp_lm, smol_tokenizer, _spec())
    requests = _requests(PROMPTS[:4])
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=4, stats=stats))
    lengths = [r["usage"]["completion_tokens"] for r in got]
    assert min(lengths) < max(lengths) and all(r["finish_reason"] == "stop" for r in got)
    assert stats.steps >= max(lengths) - 1  # the batch ran until the longest row ended, not the first
    assert stats.row_steps < 4 * stats.steps  # an ended row costs no further row-steps
    assert [_comparable(r) for r in got] == [_comparable(r) for r in _sequential(session, requests)]


def test_rows_that_all_end_at_their_first_token_still_admit_the_rest(sharp_lm, smol_tokenizer):
    """A grammar that forces its whole output ends every row at the prefill: each wave leaves the
    batch empty, and the waiting requests must still be admitted (a batch once stopped there)."""
    spec = ConstraintSpec(Kind.REGEX, "done", "test")
    session = _session(sharp_lm, smol_tokenizer, spec, "llguidance")
    session.jump_forward = True
    requests = _requests(PROMPTS[:7])
    got = list(session.batch(requests, batch_size=2))
    assert [r["id"] for r in got] == [r.id for r in requests]
    assert {r["output"] for r in got} == {"done"} and all(r["valid"] for r in got)


def test_reasoning_rows_match_sequential(sharp_lm, smol_tokenizer):
    """Reasoning mode per row: free text until the marker, then the grammar. The marker is one
    common letter so that rows leave thinking at different steps."""
    session = _session(sharp_lm, smol_tokenizer, _spec(), max_tokens=50)
    session.think_end = "e"
    requests = _requests()
    got = list(session.batch(requests, batch_size=4))
    assert [_comparable(r) for r in got] == [_comparable(r) for r in _sequential(session, requests)]
    assert any(r["reasoning"] and r["output"] for r in got)


def test_shared_prefix_reuse_gives_identical_outputs(sharp_lm, smol_tokenizer):
    session = _session(sharp_lm, smol_tokenizer, _spec())
    prompts = [session.render(r)[1] for r in _requests()]
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


def _default_model_session(smol_tokenizer) -> Session:
    """The default model in float32 on a capital-city schema (compact), jump-forward off."""
    from sgcli.engine.loader import load_model
    from sgcli.models.refs import resolve_model

    lm = load_model(resolve_model(None), device="cpu", dtype="float32", threads=1)
    capital = {
        "type": "object",
        "properties": {"country": {"type": "string"}, "capital": {"type": "string"}},
        "required": ["country", "capital"],
    }
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(capital), "test", json_options=JsonOptions(whitespace="compact"))
    return _session(lm, smol_tokenizer, spec, max_tokens=40)


@pytest.mark.model
def test_default_model_batch_equals_sequential(smol_tokenizer):
    session = _default_model_session(smol_tokenizer)
    requests = _requests([f"What is the capital of {c}?" for c in ("France", "Japan", "Peru", "Kenya", "Italy")])
    got = list(session.batch(requests, batch_size=4))
    assert [_comparable(r) for r in got] == [_comparable(r) for r in _sequential(session, requests)]
    assert all(r["valid"] for r in got)


def test_cli_batch_sizes_give_the_same_records(run_cli, tmp_path):
    """`generate --input` on the default model: batched records equal one-at-a-time records, in order."""
    lines = [json.dumps({"id": f"q{i}", "prompt": f"Say the number {i * 7}."}) for i in range(5)]
    lines.insert(1, json.dumps({"id": "bad", "messages": [{"role": "user", "content": 3}, {"content": "x"}]}))
    batch = tmp_path / "prompts.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    outs = {}
    for size in (1, 3):
        result = run_cli("generate", "--regex", "[0-9]{1,3}", "--input", batch, "--batch-size", size, "--threads", 1)
        outs[size] = [json.loads(line) for line in result.stdout.splitlines()]
        assert result.exit_code == 1, result.output  # the bad line is an invalid record, not a crash
        how = "batch 3, 1 thread" if size == 3 else "one request at a time, 1 thread"
        assert f"tok/s) · {how}" in result.stderr, result.stderr  # the summary says what the batch ran with
    assert [r["id"] for r in outs[3]] == ["q0", "bad", "q1", "q2", "q3", "q4"]
    assert [_comparable(r) for r in outs[3]] == [_comparable(r) for r in outs[1]]
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
    session = _session(sharp_lm, smol_tokenizer, _spec())
    assert session.batch_unsupported() is None
    session.think_end, session.think_budget = "e", 3
    assert "--think-budget" in session.batch_unsupported()


def test_the_context_limits_rows_as_it_limits_single_requests(sharp_lm, smol_tokenizer, monkeypatch):
    """A prompt that leaves less room than --max-tokens gets fewer tokens with a warning, and one that
    fills the context gets an error record: the same records at batch size 3 as one at a time."""
    from sgcli.app.local import run_checked

    session = _session(sharp_lm, smol_tokenizer, _spec(), "none", max_tokens=20)
    requests = _requests(["Hi", "Largest planet?", "word " * 40, "x"])
    lengths = [len(session.render(r)[1]) for r in requests]
    monkeypatch.setattr(sharp_lm.model.config, "max_position_embeddings", lengths[1] + 5)
    got = list(session.batch(requests, batch_size=3))
    assert [_comparable(r) for r in got] == [_comparable(run_checked(session, r)) for r in requests]
    assert got[1]["usage"]["completion_tokens"] <= 5 and any("cut to 5" in w for w in got[1]["warnings"])
    assert got[2]["output"] is None and "longer than the model's context" in got[2]["errors"][0]
    assert got[0]["usage"]["completion_tokens"] > 5 and got[3]["finish_reason"] != "error"


@pytest.mark.parametrize("backend", _json_backends())
def test_forced_tokens_ride_along_and_outputs_stay_those_of_one_at_a_time(any_lm, smol_tokenizer, backend):
    """With jump-forward, tokens the grammar forces are fed with the token before them: the same
    outputs as the plain batch and as the single-stream loop, in fewer forward passes."""
    session = _session(any_lm, smol_tokenizer, _spec(), backend)
    requests = _requests()
    plain = list(session.batch(requests, batch_size=4))
    session.jump_forward = True
    stats = BatchStats()
    jumped = list(session.batch(requests, batch_size=4, stats=stats))
    single = _sequential(session, requests)
    for key in ("output", "finish_reason", "valid"):
        assert [r[key] for r in jumped] == [r[key] for r in plain] == [r[key] for r in single]
    forced = sum(r["usage"]["forced_tokens"] for r in jumped)
    passes = sum(r["usage"]["forward_passes"] for r in jumped)
    if backend == "none":
        assert forced == 0
    else:  # on a CPU forced tokens may wait for a step where few rows are padded (feed_width)
        assert forced > 0 and passes < sum(r["usage"]["forward_passes"] for r in plain)


def test_feed_width_bounds_padding_on_the_cpu_only():
    from sgcli.engine.kv_batch import feed_width

    assert feed_width([1] * 15 + [9], "cpu") == 1  # one row's forced run would pad fifteen others
    assert feed_width([4, 4, 4, 3], "cpu") == 4
    assert feed_width([6, 5, 1, 1], "cpu") == 2  # 2 of 8 positions padded; at 3, 5 of 12
    assert feed_width([6, 6, 6, 1], "cpu") == 6  # 5 of 24 padded: under a quarter
    assert feed_width([1] * 15 + [9], "cuda") == 9


def test_rows_fed_different_numbers_of_tokens_keep_their_own_columns(any_lm, smol_tokenizer, monkeypatch):
    """A literal the grammar forces after a choice and after a free word: rows take it in one step
    while others take one token, so steps leave masked holes, compacted away (here at every hole);
    every row still equals its lone run."""
    from sgcli.engine import batching, kv_batch

    compactions = []
    original = batching.KVBatch.compact

    def counting(self):
        width = self.mask.shape[1]
        original(self)
        compactions.append(width - self.mask.shape[1])

    monkeypatch.setattr(batching.KVBatch, "compact", counting)
    monkeypatch.setattr(kv_batch, "COMPACT_DEAD_SHARE", 0.0)  # compact at every hole, not only when most are
    from sgcli.engine.decode import decode
    from sgcli.engine.sequence import Finished

    spec = ConstraintSpec(Kind.REGEX, "(yes|no|maybe), because the answer is [a-z]{1,8} and that is final", "t")
    compiled = check_supports("llguidance", spec).compile(spec, smol_tokenizer.vocab.padded(any_lm.logits_width))
    prompts = [smol_tokenizer.vocab.encode(p)[:6] for p in PROMPTS]
    params = SamplingParams(temperature=0.0)
    got = dict(decode_batch(any_lm, prompts, compiled, params=params, max_tokens=40, batch_size=5))
    for i, ids in enumerate(prompts):
        (alone,) = [e for e in decode(any_lm, ids, compiled, params=params, max_tokens=40) if isinstance(e, Finished)]
        assert got[i].token_ids == alone.token_ids and got[i].output == alone.output
        assert got[i].grammar_complete
    assert sum(f.forced_tokens for f in got.values()) > 10
    assert any(removed > 0 for removed in compactions)


@pytest.mark.parametrize("positions", [16, 64])
def test_drafts_in_batches_keep_what_the_model_confirms_and_hide_the_rest(
    any_lm, smol_tokenizer, monkeypatch, positions
):
    """The grammar's forced text rides along as a draft where the step has room (at most
    DRAFT_POSITIONS fed positions on a CPU): a random model turns most drafts down (it spells text
    its own way), so their columns are hidden, and every row still equals its lone run and the
    batch without drafts."""
    from sgcli.engine import batching, kv_batch
    from sgcli.engine.decode import decode
    from sgcli.engine.sequence import Finished

    monkeypatch.setattr(kv_batch, "DRAFT_POSITIONS", positions)
    hidden = []
    original = batching.KVBatch.hide_draft
    monkeypatch.setattr(batching.KVBatch, "hide_draft", lambda self, r, n: hidden.append(n) or original(self, r, n))
    spec = ConstraintSpec(Kind.REGEX, "(yes|no|maybe), because the answer is [a-z]{1,8} and that is final", "t")
    compiled = check_supports("llguidance", spec).compile(spec, smol_tokenizer.vocab.padded(any_lm.logits_width))
    prompts = [smol_tokenizer.vocab.encode(p)[:6] for p in PROMPTS]
    params = SamplingParams(temperature=0.0)
    got = dict(decode_batch(any_lm, prompts, compiled, params=params, max_tokens=40, batch_size=5))
    assert hidden and any(n > 0 for n in hidden)  # drafts were fed, and some were turned down
    monkeypatch.setattr(batching.Row, "_draft", lambda self, previous: [])
    undrafted = dict(decode_batch(any_lm, prompts, compiled, params=params, max_tokens=40, batch_size=5))
    for i, ids in enumerate(prompts):
        (alone,) = [e for e in decode(any_lm, ids, compiled, params=params, max_tokens=40) if isinstance(e, Finished)]
        assert got[i].token_ids == alone.token_ids == undrafted[i].token_ids and got[i].output == alone.output


@pytest.mark.model
def test_default_model_drafts_in_batches_save_passes_and_change_nothing(smol_tokenizer, monkeypatch):
    """The default model confirms most drafts of a schema's keys: a batch with drafts equals the
    single-stream loop with jump-forward, in fewer forward passes than the batch without them."""
    from sgcli.engine import batching

    session = _default_model_session(smol_tokenizer)
    session.jump_forward = True
    requests = _requests([f"What is the capital of {c}?" for c in ("France", "Japan", "Peru")])
    drafted = list(session.batch(requests, batch_size=1))
    single = _sequential(session, requests)  # its passes differ: it drafts into the prefill, a batch after it
    for key in ("output", "finish_reason", "valid"):
        assert [r[key] for r in drafted] == [r[key] for r in single]
    assert [r["usage"]["completion_tokens"] for r in drafted] == [r["usage"]["completion_tokens"] for r in single]
    assert all(r["valid"] for r in drafted)
    monkeypatch.setattr(batching.Row, "_draft", lambda self, previous: [])
    undrafted = list(session.batch(requests, batch_size=1))
    passes = [sum(r["usage"]["forward_passes"] for r in records) for records in (drafted, undrafted)]
    assert passes[0] < passes[1], passes
