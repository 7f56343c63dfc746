"""Engine pieces in isolation: masking, sampling, detokenization, vocab padding."""

from __future__ import annotations

import numpy as np
import torch

from sgcli.backends.base import allowed_ids, new_bitmask
from sgcli.engine.sampling import Masker, SamplingParams, sample
from sgcli.tokenizers.vocab import IncrementalDetokenizer, Vocab


def _bitmask(allowed: list[int], size: int) -> np.ndarray:
    bm = np.zeros((size + 31) // 32, dtype=np.int32)
    for i in allowed:
        bm[i // 32] |= np.int32(np.uint32(1 << (i % 32)).view(np.int32))
    return bm


def test_mask_applies_to_logits_wider_than_the_tokenizer():
    vocab_size, width = 70, 96  # model pads its logits past the tokenizer
    logits = torch.zeros(width)
    Masker(width, "cpu").apply(logits, _bitmask([0, 31, 32, 69], vocab_size))
    finite = torch.isfinite(logits).nonzero().flatten().tolist()
    assert finite == [0, 31, 32, 69]


def test_allowed_ids_reads_every_bit():
    bm = _bitmask([1, 33, 63, 64], 100)
    assert allowed_ids(bm, 100).tolist() == [1, 33, 63, 64]
    assert len(allowed_ids(new_bitmask(100), 100)) == 100


def test_sampling_never_picks_a_masked_token():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(500)
    Masker(500, "cpu").apply(logits, _bitmask([7, 123, 499], 500))
    for params in (
        SamplingParams(temperature=1.5),
        SamplingParams(temperature=1.0, top_k=2),
        SamplingParams(temperature=1.0, top_p=0.5),
    ):
        picks = {sample(logits.clone(), params, gen) for _ in range(200)}
        assert picks <= {7, 123, 499}
    assert sample(logits, SamplingParams(temperature=0), None) == int(torch.argmax(logits))


def test_top_p_keeps_the_smallest_set_reaching_p():
    gen = torch.Generator().manual_seed(0)
    logits = torch.log(torch.tensor([0.6, 0.3, 0.1]))
    picks = {sample(logits.clone(), SamplingParams(temperature=1.0, top_p=0.5), gen) for _ in range(100)}
    assert picks == {0}


def _vocab(tokens: list[bytes], special=()) -> Vocab:
    return Vocab(tokens=tokens, special_ids=frozenset(special), stop_ids=(0,), vocab_type="raw", source="t")


def test_detokenizer_never_splits_a_multibyte_character():
    euro = "€".encode()  # 3 bytes
    vocab = _vocab([b"<eos>", euro[:1], euro[1:2], euro[2:], b"ab"], special=[0])
    detok = IncrementalDetokenizer(vocab)
    pieces = [detok.feed(i) for i in (4, 1, 2, 3, 4, 0)]
    assert pieces == ["ab", "", "", "€", "ab", ""]
    assert "\ufffd" not in "".join(pieces)


def test_padded_vocab_marks_extra_ids_special():
    v = _vocab([b"a", b"b"]).padded(5)
    assert len(v) == 5 and {2, 3, 4} <= v.special_ids and v.tokens[4] == b""
    assert v.padding == 3 and v.padded(40).padding == 38  # ids no tokenizer names: never sampled


def test_an_unconstrained_mask_allows_every_token_and_no_padding():
    from sgcli.backends.base import allow_every_token

    for size, padding in ((70, 26), (64, 32), (33, 0), (32, 33)):
        vocab = _vocab([b"x"] * size).padded(size + padding)
        mask = np.zeros((size + padding + 31) // 32, dtype=np.int32)
        allow_every_token(mask, vocab)
        assert allowed_ids(mask, size + padding).tolist() == list(range(size))
