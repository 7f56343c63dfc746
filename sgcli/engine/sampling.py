"""Masking and sampling on one row of logits."""

from __future__ import annotations

import numpy as np
import torch

from sgcli.backends.base import BITS_PER_WORD, bitmask_words, unpack_bits
from sgcli.batch.sampling import SamplingParams


class Masker:
    """Applies a backend's int32 bitmask to logits of any width.

    Ids beyond the bitmask (a model whose logits are wider than the tokenizer) are
    always masked out. On CPU the work is done in numpy on the logits' own memory:
    tiny multi-threaded torch ops cost milliseconds on a busy machine. On an accelerator
    the mask stays packed (vocab/32 int32 words) in pinned host memory (`buffer`, which
    matchers fill in place), is copied without blocking and unpacked on the device, so a
    step's only host sync is reading the sampled id.
    """

    def __init__(self, width: int, device, words: int | None = None):
        self.width = width
        self.device = torch.device(device)
        words = words if words is not None else bitmask_words(width)
        if self.device.type == "cpu":
            self.buffer = np.full(words, -1, dtype=np.int32)
            return
        pinned = torch.full((words,), -1, dtype=torch.int32, pin_memory=torch.cuda.is_available())
        self._pinned = pinned  # keeps the pinned memory alive under the numpy view
        self.buffer = pinned.numpy()
        self._on_device = torch.empty(words, dtype=torch.int32, device=self.device)
        self._shifts = _bit_shifts(self.device)

    def apply(self, logits: torch.Tensor, bitmask: np.ndarray) -> bool:
        """Mask `logits` in place; False when the mask allows no token at all."""
        n = min(bitmask.size * BITS_PER_WORD, logits.numel())
        if self.device.type == "cpu":
            bits = unpack_bits(bitmask)
            values = logits.numpy()
            np.putmask(values[:n], bits[:n] == 0, -np.inf)
            values[n:] = -np.inf
            return bool(bits[:n].any())
        if bitmask is self.buffer:
            self._on_device.copy_(self._pinned, non_blocking=True)
        else:
            self._on_device.copy_(torch.from_numpy(bitmask))
        apply_packed_mask(logits, self._on_device, self._shifts)
        return any_bit_set(bitmask, n)


def _bit_shifts(device) -> torch.Tensor:
    """0 .. BITS_PER_WORD-1: `(word >> shifts) & 1` unpacks a word, least significant bit first."""
    return torch.arange(BITS_PER_WORD, dtype=torch.int32, device=device)


def apply_packed_mask(logits: torch.Tensor, words: torch.Tensor, shifts: torch.Tensor | None = None) -> None:
    """Mask 1-D `logits` in place by packed int32 `words` (the layout of `sgcli.backends.base`), on
    the tensors' own device with torch bit operations; ids past the mask are masked out."""
    if shifts is None:
        shifts = _bit_shifts(words.device)
    n = min(words.numel() * BITS_PER_WORD, logits.numel())
    allowed = ((words.unsqueeze(1) >> shifts) & 1).reshape(-1)[:n].bool()
    logits[:n].masked_fill_(~allowed, float("-inf"))
    if logits.numel() > n:
        logits[n:] = float("-inf")


def any_bit_set(bitmask: np.ndarray, n: int) -> bool:
    """Whether any of the first `n` bits of a packed int32 mask is set (host side, no unpacking)."""
    full, rest = divmod(n, BITS_PER_WORD)
    if bitmask[:full].any():
        return True
    return bool(rest and int(bitmask[full]) & ((1 << rest) - 1))


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """One token id from (already masked) logits."""
    if params.temperature <= 0:
        if logits.device.type == "cpu":
            return int(np.argmax(logits.numpy()))
        return int(torch.argmax(logits))
    logits = logits / params.temperature
    if params.top_k and params.top_k < logits.numel():
        kth = torch.topk(logits, params.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits.float(), dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        cumulative = torch.cumsum(sorted_probs, dim=-1)
        drop = cumulative - sorted_probs > params.top_p  # keep the smallest set reaching top_p
        sorted_probs[drop] = 0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))
