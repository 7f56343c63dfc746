"""The accelerator masking path (packed words unpacked with torch bit ops), checked on CPU tensors."""

from __future__ import annotations

import numpy as np
import torch

from sgcli.engine.sampling import Masker, any_bit_set, apply_packed_mask


def _random_mask(words: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-(2**31), 2**31, size=words, dtype=np.int64).astype(np.int32)


def test_packed_mask_on_device_equals_the_host_path():
    for seed, (words, width) in enumerate([(4, 128), (4, 140), (3, 70), (1570, 50240)]):
        bitmask = _random_mask(words, seed)
        logits = torch.randn(width, generator=torch.Generator().manual_seed(seed))
        host = logits.clone()
        Masker(width, "cpu").apply(host, bitmask)
        device = logits.clone()
        apply_packed_mask(device, torch.from_numpy(bitmask))
        assert torch.equal(torch.isinf(host), torch.isinf(device))
        assert torch.equal(host[~torch.isinf(host)], device[~torch.isinf(device)])


def test_sign_bit_and_ids_past_the_mask():
    bitmask = np.zeros(2, dtype=np.int32)
    bitmask[0] = np.int32(-(2**31))  # only id 31 (the sign bit)
    logits = torch.zeros(80)
    apply_packed_mask(logits, torch.from_numpy(bitmask))
    assert torch.isfinite(logits).nonzero().flatten().tolist() == [31]


def test_any_bit_set_reads_only_the_first_n_bits():
    bitmask = np.zeros(3, dtype=np.int32)
    bitmask[2] = np.int32(1 << 5)  # id 69
    assert any_bit_set(bitmask, 70) and not any_bit_set(bitmask, 69)
    bitmask[2] = 0
    assert not any_bit_set(bitmask, 96)
    bitmask[0] = -1
    assert any_bit_set(bitmask, 1)


def test_every_reader_of_the_mask_layout_agrees_with_the_bit_test():
    """The one unpacking (`unpack_bits`), the one bit test (`allowed`), the allowed ids, the stop-id
    clearing and the device unpacking read the same bit for the same token."""
    from sgcli.backends.base import allowed, allowed_ids, unpack_bits
    from sgcli.engine.sequence import clear_bits

    bitmask = _random_mask(5, 11)
    width = 150
    bits = unpack_bits(bitmask, width)
    assert bits.tolist() == [int(allowed(bitmask, i)) for i in range(width)]
    assert allowed_ids(bitmask, width).tolist() == [i for i in range(width) if allowed(bitmask, i)]
    logits = torch.zeros(width)
    apply_packed_mask(logits, torch.from_numpy(bitmask))
    assert torch.isfinite(logits).int().tolist() == bits.tolist()
    cleared = bitmask.copy()
    clear_bits(cleared, [31, 32, 149, 10_000])  # the sign bit, a word's first bit, the last id, one past the mask
    assert [allowed(cleared, i) for i in (31, 32, 149)] == [False, False, False]
    assert unpack_bits(cleared, width).sum() == bits.sum() - sum(bits[i] for i in (31, 32, 149))
