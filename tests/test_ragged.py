"""Ragged passes (`sgcli.engine.ragged`): padding packed out of the position-wise work, attention per
run of rows, and several parts with caches of their own in one pass, all giving the hidden states
the padded, one-part passes give."""

from __future__ import annotations

import itertools
import random

import pytest
import torch

from sgcli.engine import ragged
from sgcli.engine.ragged import PassInput, plan, segments

VOCAB = 300


def _brute_force(widths: list[int], call: int) -> int:
    """The cheapest cost over every split of `widths` into runs of neighbours."""
    n = len(widths)
    best = None
    for cuts in itertools.product([False, True], repeat=n - 1):
        cost, start = 0, 0
        for i in range(1, n + 1):
            if i == n or cuts[i - 1]:
                cost += (i - start) * max(widths[start:i]) + call
                start = i
        best = cost if best is None else min(best, cost)
    return best


def test_segments_are_the_cheapest_split_into_runs_of_neighbours():
    rng = random.Random(3)
    for _ in range(200):
        widths = [rng.choice([1, 1, 1, 2, 3, 9, 40]) for _ in range(rng.randint(1, 8))]
        runs = segments(widths, call=4)
        assert [r for s, e, _ in runs for r in range(s, e)] == list(range(len(widths)))  # every row, in order, once
        assert all(w == max(widths[s:e]) for s, e, w in runs)
        assert sum((e - s) * w + 4 for s, e, w in runs) == _brute_force(widths, 4)
    assert segments([1, 1, 1, 12]) == [(0, 3, 1), (3, 4, 12)]  # one-token rows never attend over a prompt chunk


def test_plan_packs_only_passes_with_enough_padding():
    assert plan(None) is None
    assert plan(torch.ones(4, 1)) is None  # one position a row: nothing to pack
    assert plan(torch.ones(2, 8)) is None  # no padding
    assert plan(torch.tensor([[1] * 16, [1] * 15 + [0]])) is None  # 1 of 32 positions: not worth it
    fed = torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]])
    packing = plan(fed)
    assert packing.index.tolist() == [0, 1, 2, 3, 4, 8, 9]
    x = torch.arange(12.0).view(3, 4, 1) + 1
    packed = packing.pack(x)
    assert packed.view(-1).tolist() == [1, 2, 3, 4, 5, 9, 10]
    assert torch.equal(packing.unpack(packed), x * fed[..., None])  # zeros at the padding


@pytest.fixture(scope="module")
def native():
    from helpers import random_llama

    return random_llama(VOCAB, "ragged-random", initializer_range=0.3, impl="native").runtime


def _feeds(rows: list[int], seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ids, padding mask and positions of rows fed these many tokens each, padded on the right."""
    g = torch.Generator().manual_seed(seed)
    width = max(rows)
    ids = torch.randint(1, VOCAB, (len(rows), width), generator=g)
    mask = torch.tensor([[1] * n + [0] * (width - n) for n in rows])
    return ids * mask, mask, torch.arange(width).expand(len(rows), -1)


@pytest.mark.parametrize("rows", [[1, 1, 1, 12], [5, 2, 7], [9, 9, 1]])
def test_a_packed_pass_gives_the_padded_passs_hidden_states(native, monkeypatch, rows):
    ids, mask, positions = _feeds(rows, seed=len(rows))
    assert plan(mask) is not None  # the first pass really packs
    with torch.inference_mode():
        packed, packed_cache = native.hidden(ids, native.new_cache(), attention_mask=mask, position_ids=positions)
        monkeypatch.setattr(ragged, "PACK_PADDING_SHARE", 2.0)  # never pack
        padded, padded_cache = native.hidden(ids, native.new_cache(), attention_mask=mask, position_ids=positions)
    real = mask.bool()
    assert torch.allclose(packed[real], padded[real], atol=1e-5, rtol=1e-5)
    assert not packed[~real].any()  # padding positions hold zeros, never a computed value
    for mine, theirs in zip(packed_cache.layers, padded_cache.layers):
        keep = real[:, None, :, None].expand_as(mine.keys)
        assert torch.allclose(mine.keys[keep], theirs.keys[keep], atol=1e-5)
        assert torch.allclose(mine.values[keep], theirs.values[keep], atol=1e-5)


def test_parts_in_one_pass_give_what_each_gives_alone(native):
    """A decode step over one cache beside a prompt chunk over another: one pass, the same states."""
    with torch.inference_mode():
        ids, mask, positions = _feeds([6, 3], seed=1)
        _, running = native.hidden(ids, native.new_cache(), attention_mask=mask, position_ids=positions)
        step = PassInput(torch.tensor([[7], [8]]), torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], 1))
        step.position_ids = torch.tensor([[6], [3]])
        chunk = PassInput(*_feeds([10, 4, 1], seed=2))
        chunk.cache = native.new_cache()
        step.cache = running
        together = native.hidden_parts([step, chunk])
        # the same two passes one at a time, from the same starting caches
        _, running_again = native.hidden(ids, native.new_cache(), attention_mask=mask, position_ids=positions)
        alone = [
            native.hidden(
                step.input_ids, running_again, attention_mask=step.attention_mask, position_ids=step.position_ids
            ),
            native.hidden(
                chunk.input_ids,
                native.new_cache(),
                attention_mask=chunk.attention_mask,
                position_ids=chunk.position_ids,
            ),
        ]
    for (hidden, cache), (want, want_cache), part in zip(together, alone, (step, chunk)):
        real = part.attention_mask[:, -part.input_ids.shape[1] :].bool()
        assert torch.allclose(hidden[real], want[real], atol=1e-5, rtol=1e-5)
        assert cache.get_seq_length() == want_cache.get_seq_length()
