"""A batch's steps (sgcli.engine.kv_batch): rows fed different numbers of tokens (forced runs,
drafts, prompt chunks beside running rows), each row still the single-stream loop's, on both
runtimes (transformers' and sgcli's native forward, which packs padding out and prefills joining
rows inside the steps)."""

from __future__ import annotations

import batch_cases as cases
import pytest

from sgcli.backends import check_supports
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.engine.batching import BatchStats, decode_batch
from sgcli.engine.sampling import SamplingParams


@pytest.mark.parametrize("chunk", [0, 5, 512])
@pytest.mark.parametrize("system", [cases.SYSTEM, None])
def test_rows_prefilled_in_chunks_beside_the_batch_give_the_outputs_of_one_at_a_time(
    sharp_native, smol_tokenizer, monkeypatch, chunk, system
):
    """Admitted rows are prefilled inside the batch's steps (`PREFILL_CHUNK` prompt tokens a step,
    one pass with the running rows) or, at 0, in passes of their own: the records are the
    single-stream loop's either way, shared head or none."""
    from sgcli.engine import batching

    monkeypatch.setattr(batching, "PREFILL_CHUNK", chunk)
    session = cases.session_for(sharp_native, smol_tokenizer, cases.json_spec(), system=system)
    requests = cases.make_requests()
    stats = BatchStats()
    got = list(session.batch(requests, batch_size=3, stats=stats))
    expected = cases.sequential(session, requests)
    passes = [(r["usage"].pop("forward_passes"), e["usage"].pop("forward_passes")) for r, e in zip(got, expected)]
    assert [cases.comparable(r) for r in got] == [cases.comparable(r) for r in expected]
    if chunk == 5:  # every prompt is longer than a chunk: prefilled over several steps, beside running rows
        assert stats.prefill_passes > len(requests)
        assert stats.joint_steps > 0
        assert all(mine > theirs for mine, theirs in passes)  # each chunk a pass the record counts
    else:
        assert all(mine == theirs for mine, theirs in passes)
    if chunk == 0:
        assert stats.joint_steps == 0


@pytest.mark.parametrize("backend", cases.json_backends())
def test_forced_tokens_ride_along_and_outputs_stay_those_of_one_at_a_time(any_lm, smol_tokenizer, backend):
    """With jump-forward, tokens the grammar forces are fed with the token before them: the same
    outputs as the plain batch and as the single-stream loop, in fewer forward passes."""
    session = cases.session_for(any_lm, smol_tokenizer, cases.json_spec(), backend)
    requests = cases.make_requests()
    plain = list(session.batch(requests, batch_size=4))
    session.jump_forward = True
    stats = BatchStats()
    jumped = list(session.batch(requests, batch_size=4, stats=stats))
    single = cases.sequential(session, requests)
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
    prompts = [smol_tokenizer.vocab.encode(p)[:6] for p in cases.PROMPTS]
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
    prompts = [smol_tokenizer.vocab.encode(p)[:6] for p in cases.PROMPTS]
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

    session = cases.default_model_session(smol_tokenizer)
    session.jump_forward = True
    requests = cases.make_requests([f"What is the capital of {c}?" for c in ("France", "Japan", "Peru")])
    drafted = list(session.batch(requests, batch_size=1))
    single = cases.sequential(session, requests)  # its passes differ: it drafts into the prefill, a batch after it
    for key in ("output", "finish_reason", "valid"):
        assert [r[key] for r in drafted] == [r[key] for r in single]
    assert [r["usage"]["completion_tokens"] for r in drafted] == [r["usage"]["completion_tokens"] for r in single]
    assert all(r["valid"] for r in drafted)
    monkeypatch.setattr(batching.Row, "_draft", lambda self, previous: [])
    undrafted = list(session.batch(requests, batch_size=1))
    passes = [sum(r["usage"]["forward_passes"] for r in records) for records in (drafted, undrafted)]
    assert passes[0] < passes[1], passes
