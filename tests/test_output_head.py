"""The output head apart from the model body (sgcli.engine.head), and what batching builds on it:
logits only where a row's mask leaves a choice, and one prefill pass per group of admitted rows."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from sgcli.engine.batching import BatchStats, decode_batch
from sgcli.engine.prefix import prefill_groups
from sgcli.engine.sampling import Masker, SamplingParams


@pytest.fixture(scope="module", params=[False, True], ids=["untied", "tied"])
def lm(request):
    from helpers import random_llama

    return random_llama(300, "head-random", initializer_range=0.3, tied=request.param)


def test_projected_hidden_states_are_the_models_logits(lm):
    head = lm.runtime.head()
    assert head is not None
    ids = torch.tensor([[5, 17, 240, 3]])
    with torch.inference_mode():
        expected = lm.model(input_ids=ids).logits[0].float()
        hidden, _ = lm.runtime.hidden(ids, None)
        assert torch.equal(head.logits(hidden[0]), expected)
        some = torch.tensor([3, 99, 250])
        row = head.logits_for(hidden[0, -1], some, 300)
    assert torch.allclose(row[some], expected[-1, some], atol=1e-5)
    assert torch.isinf(row).sum() == 300 - 3 and row.argmax() in some


def test_a_model_whose_logits_differ_from_its_projection_gets_no_head(smol_tokenizer):
    """A config that says the logits are soft-capped while the Llama forward does not cap them: the
    probe sees the difference, and batching says why it cannot run instead of giving other logits."""
    from helpers import random_llama

    from sgcli.engine.batching import unsupported_reason

    capped = random_llama(300, "capped-random", initializer_range=0.3)
    capped.model.config.final_logit_softcapping = 0.5
    assert capped.runtime.head() is None
    assert "cannot reproduce from its hidden states" in unsupported_reason(capped)
    with pytest.raises(ValueError, match="hidden states"):
        list(decode_batch(capped, [[1, 2, 3]], None, params=SamplingParams(), max_tokens=4, batch_size=2))


def test_capped_logits_are_transformers_in_float32_and_round_once_in_bfloat16():
    """Gemma's soft-capped logits: in float32 exactly transformers' `tanh(x / cap) * cap`; in bfloat16
    widened first and capped once (not rounded after each step): within two of bfloat16's roundings
    of transformers' own, and closer to the float32 values."""
    from sgcli.engine.head import OutputHead

    torch.manual_seed(0)
    projection = torch.nn.Linear(64, 4000, bias=False)
    projection.weight.data.mul_(8)
    hidden = torch.randn(3, 64)
    with torch.inference_mode():
        truth = torch.tanh(projection(hidden) / 30.0) * 30.0
        assert torch.equal(OutputHead(projection, softcap=30.0).logits(hidden), truth)
        half = projection.to(torch.bfloat16)
        raw = half(hidden.bfloat16())
        theirs = (torch.tanh(raw / 30.0) * 30.0).float()
        ours = OutputHead(half, softcap=30.0).logits(hidden.bfloat16())
    assert ours.dtype == torch.float32 and torch.equal(ours, torch.tanh(raw.float() / 30.0) * 30.0)
    assert (ours - theirs).abs().max() <= 2 * 30.0 * 2**-8  # bfloat16 keeps 8 significant bits
    assert (ours - truth).abs().mean() < (theirs - truth).abs().mean()


def test_one_allowed_token_is_taken_without_logits_or_sampling(smol_tokenizer):
    from sgcli.backends import compile_for
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine.sequence import SequenceState

    spec = ConstraintSpec(Kind.REGEX, "forced text", "test")
    compiled, _ = compile_for("xgrammar", spec, smol_tokenizer.vocab)
    seq = SequenceState(compiled, SamplingParams(temperature=1.0, seed=3), max_tokens=8)
    allowed = seq.allowed(narrow=16)
    assert allowed.count == len(allowed.ids) and allowed.count <= 16
    masker = Masker(len(smol_tokenizer.vocab), "cpu")
    while allowed is not None and allowed.count > 1:  # the first bytes may be spelled several ways
        logits = torch.zeros(len(smol_tokenizer.vocab))
        seq.take(seq.choose(allowed, logits, masker))
        allowed = seq.allowed(narrow=16)
    state = seq.generator.get_state()
    token = seq.choose(allowed, None, masker)
    assert token == int(allowed.ids[0])
    assert torch.equal(seq.generator.get_state(), state)  # no random number drawn


def test_prefill_groups_bound_padding_and_size():
    assert prefill_groups([10, 12, 9, 11]) == [[2, 0, 3, 1]]
    groups = prefill_groups([5, 400, 6, 7, 380])
    assert groups == [[0, 2, 3], [4, 1]]  # short prompts are not padded to the long ones
    assert prefill_groups([3000, 4, 4], limit=2048) == [[1, 2], [0]]  # longer than the limit: alone
    for lengths in ([1] * 40, list(range(1, 60)), [50, 1, 1, 1, 1, 1]):
        for group in prefill_groups(lengths, limit=64):
            longest = max(lengths[i] for i in group)
            assert len(group) == 1 or (
                len(group) * longest <= 2 * sum(lengths[i] for i in group) and len(group) * longest <= 64
            )
        assert sorted(i for g in prefill_groups(lengths) for i in g) == list(range(len(lengths)))


def test_rows_with_heads_of_different_lengths_prefill_together_and_match_one_at_a_time(smol_tokenizer):
    """Two system prompts of different lengths, each shared by several requests, and requests that
    share nothing: admitted together, prefilled in few passes, every row equal to its lone decode."""
    from helpers import random_llama

    from sgcli.backends import compile_for
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
    from sgcli.engine.decode import decode
    from sgcli.engine.sequence import Finished

    sharp = random_llama(len(smol_tokenizer.vocab), "sharp-random", initializer_range=0.3)
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}}}
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "t", json_options=JsonOptions(whitespace="compact"))
    compiled, _ = compile_for("llguidance", spec, smol_tokenizer.vocab.padded(sharp.logits_width))
    encode = smol_tokenizer.vocab.encode
    long_head, short_head = encode("You answer in JSON. " * 6), encode("Be brief, always. " * 3)
    prompts = [long_head + encode(q) for q in ("Cat?", "A dog with a long name?", "Sea")]
    prompts += [short_head + encode(q) for q in ("One", "Two words here", "x")]
    prompts += [encode("Nothing shared at all here"), encode("Q")]
    params = SamplingParams(temperature=0.0)
    stats = BatchStats()
    got = dict(decode_batch(sharp, prompts, compiled, params=params, max_tokens=24, batch_size=8, stats=stats))
    for i, ids in enumerate(prompts):
        alone = decode(sharp, ids, compiled, params=params, max_tokens=24, jump_forward=False)
        (finished,) = [e for e in alone if isinstance(e, Finished)]
        assert got[i].token_ids == finished.token_ids, i
        assert got[i].finish_reason == finished.finish_reason
    assert stats.prefill_passes < len(prompts) and stats.reused_prefix_tokens > 0
    assert len({len(f.token_ids) for f in got.values()}) > 1


def test_allowed_ids_are_the_set_bits(smol_tokenizer):
    from sgcli.backends import compile_for
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine.sequence import SequenceState

    compiled, _ = compile_for("llguidance", ConstraintSpec(Kind.REGEX, "[0-9]+", "t"), smol_tokenizer.vocab)
    seq = SequenceState(compiled, SamplingParams(), max_tokens=4)
    allowed = seq.allowed(narrow=len(smol_tokenizer.vocab))
    bits = np.unpackbits(seq.bitmask.view(np.uint8), bitorder="little")[: len(smol_tokenizer.vocab)]
    assert list(allowed.ids) == list(np.flatnonzero(bits)) and allowed.count == len(allowed.ids) > 1
    digits = {smol_tokenizer.vocab.tokens[i] for i in allowed.ids}
    assert all(t.isdigit() for t in digits)
    assert seq.allowed(narrow=1).ids is None  # more than `narrow`: the ids are not listed


def test_subset_logits_only_where_the_projection_is_compute_bound():
    from sgcli.engine.head import narrow_limit

    assert narrow_limit(49152, "cpu") == 49152 // 8
    assert narrow_limit(49152, "cuda:0") == 0  # one kernel for the whole projection beats gathering rows


def test_a_system_prompt_under_repeated_requests_is_computed_once(smol_tokenizer):
    """Each request twice (as when sampling n answers per prompt): every pair's longest shared head
    is its whole prompt, and those heads extend one shared system prompt, which must be run through
    the model once, not once per pair. Outputs stay those of one request at a time."""
    from helpers import random_llama

    from sgcli.backends import compile_for
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine.decode import decode
    from sgcli.engine.prefix import neighbour_heads
    from sgcli.engine.sequence import Finished

    sharp = random_llama(len(smol_tokenizer.vocab), "sharp-random", initializer_range=0.3)
    compiled, _ = compile_for("xgrammar", ConstraintSpec(Kind.REGEX, "[a-z]{1,6}", "t"), smol_tokenizer.vocab)
    encode = smol_tokenizer.vocab.encode
    system = encode("You are a terse assistant who answers with one lowercase word. " * 3)
    questions = [encode(q) for q in ("Sky?", "Grass colour today?", "Fire", "Snow, please")]
    prompts = [system + q for q in questions for _ in range(2)]
    assert tuple(system) in {h[: len(system)] for h in neighbour_heads(prompts)}
    params = SamplingParams(temperature=0.0)
    stats = BatchStats()
    got = dict(decode_batch(sharp, prompts, compiled, params=params, max_tokens=6, batch_size=8, stats=stats))
    unique = len(system) + sum(len(q) for q in questions)
    assert stats.prefill_tokens <= unique + len(prompts)  # the system prompt once, each question once, one token each
    assert stats.prefill_passes == 3  # the system prompt; the four questions side by side; the eight last tokens
    for i, ids in enumerate(prompts):
        (alone,) = [e for e in decode(sharp, ids, compiled, params=params, max_tokens=6) if isinstance(e, Finished)]
        assert got[i].token_ids == alone.token_ids


def test_a_projection_with_a_bias_gives_the_same_subset_logits():
    from helpers import random_llama

    biased = random_llama(300, "biased-random", initializer_range=0.3)
    torch.manual_seed(5)
    biased.model.lm_head = torch.nn.Linear(32, 300, bias=True)
    head = biased.runtime.head()
    assert head is not None and head.can_gather
    ids = torch.tensor([[9, 8, 7]])
    some = torch.tensor([0, 150, 299])
    with torch.inference_mode():
        expected = biased.model(input_ids=ids).logits[0, -1].float()
        hidden, _ = biased.runtime.hidden(ids, None)
        row = head.logits_for(hidden[0, -1], some, 300)
    assert torch.allclose(row[some], expected[some], atol=1e-5)
