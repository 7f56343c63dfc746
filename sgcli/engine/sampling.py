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
    always masked out.
    """

    def __init__(self, width: int, device):
        self.width = width
        self._shifts = torch.arange(32, dtype=torch.int32, device=device)

    def apply(self, logits: torch.Tensor, bitmask: np.ndarray) -> None:
        words = torch.from_numpy(bitmask).to(logits.device)
        allowed = ((words.unsqueeze(-1) >> self._shifts) & 1).bool().flatten()
        n = min(allowed.numel(), logits.numel())
        logits[:n].masked_fill_(~allowed[:n], float("-inf"))
        if logits.numel() > n:
            logits[n:] = float("-inf")


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """One token id from (already masked) logits."""
    if params.temperature <= 0:
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
