"""Masking and sampling on one row of logits."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    seed: int | None = 0


class Masker:
    """Applies a backend's int32 bitmask to logits of any width.

    Ids beyond the bitmask (a model whose logits are wider than the tokenizer) are
    always masked out. On CPU the work is done in numpy on the logits' own memory:
    tiny multi-threaded torch ops cost milliseconds on a busy machine.
    """

    def __init__(self, width: int, device):
        self.width = width
        self.device = torch.device(device)

    def apply(self, logits: torch.Tensor, bitmask: np.ndarray) -> bool:
        """Mask `logits` in place; False when the mask allows no token at all."""
        bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
        n = min(bits.size, logits.numel())
        if self.device.type == "cpu":
            values = logits.numpy()
            np.putmask(values[:n], bits[:n] == 0, -np.inf)
            values[n:] = -np.inf
        else:
            allowed = torch.from_numpy(bits[:n]).to(logits.device, non_blocking=True).bool()
            logits[:n].masked_fill_(~allowed, float("-inf"))
            if logits.numel() > n:
                logits[n:] = float("-inf")
        return bool(bits[:n].any())


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
