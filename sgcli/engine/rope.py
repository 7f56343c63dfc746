"""Rotary position embeddings with the scalings transformers ships (all but Gemma 4's `proportional`).

Why here: the frequencies are where checkpoints differ most (Llama 3.1's `llama3` smoothing, YaRN's
ramp and attention factor, linear interpolation, dynamic NTK, LongRoPE's two factor sets), and
they must be transformers' own to the last bit for the native forward to give its logits: each
function below follows `transformers.modeling_rope_utils` (5.24) in the same float32 operations.

The native forward turns them into cos and sin tables once a pass (`llama.rotary_tables`). The
dynamic kinds depend on the pass: dynamic NTK stretches the frequencies once the longest position
passes the trained length, LongRoPE switches to its long factors there. Here each row of a pass
uses its own longest position, as the formula says, so a batch row rotates as it would alone.
transformers differs in two corners: it shares a batch's longest position across its rows, and it
keeps the dynamic frequencies of the longest pass seen until a pass falls below the trained length
again (a cache of its rotary module), so after a cropped draft it may still use a longer pass's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

KINDS = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")


@dataclass(frozen=True)
class Rope:
    """One rotary embedding: its kind, base, rotated width and the kind's parameters (a checkpoint's
    `rope_parameters` dict, filled in as transformers' `standardize_rope_params` fills it)."""

    kind: str
    theta: float
    dim: int  # head width (the whole of it is rotated)
    max_positions: int  # the config's max_position_embeddings
    params: dict = field(default_factory=dict)

    def get(self, name: str, default=None):
        return self.params.get(name, default)

    @property
    def per_pass(self) -> bool:
        """Whether the frequencies depend on the pass's longest position (dynamic NTK, LongRoPE)."""
        return self.kind in ("dynamic", "longrope")

    def frequencies(self, seq_len: int | None = None) -> tuple[torch.Tensor, float]:
        """(inverse frequencies [dim / 2] in float32, attention scaling of cos and sin) for a pass
        whose longest position is `seq_len - 1` (None: at load, as transformers initialises them)."""
        if self.kind == "default":
            return _base(self.theta, self.dim), 1.0
        return _KINDS[self.kind](self, seq_len)


def _base(theta: float, dim: int) -> torch.Tensor:
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def _linear(rope: Rope, seq_len) -> tuple[torch.Tensor, float]:
    return _base(rope.theta, rope.dim) / rope.get("factor"), 1.0


def _dynamic(rope: Rope, seq_len) -> tuple[torch.Tensor, float]:
    """Dynamic NTK: the base grows with the pass's length past max_position_embeddings."""
    factor, dim, trained = rope.get("factor"), rope.dim, rope.max_positions
    if seq_len is None or seq_len <= trained:  # transformers' frequencies at load, kept until a pass is longer
        length = trained
        base = rope.theta * ((factor * length / trained) - (factor - 1)) ** (dim / (dim - 2))
    else:  # as transformers recomputes them, from the pass's length as a tensor (float32 arithmetic)
        length = torch.tensor(seq_len)
        base = rope.theta * ((factor * length / trained) - (factor - 1)) ** (dim / (dim - 2))
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), 1.0


def _yarn(rope: Rope, seq_len) -> tuple[torch.Tensor, float]:
    base, dim = rope.theta, rope.dim
    factor, original = rope.get("factor"), rope.get("original_max_position_embeddings")
    if factor is None:
        factor = rope.max_positions / original

    def mscale_of(scale, mscale=1):
        return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0

    attention_factor = rope.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = rope.get("mscale"), rope.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = float(mscale_of(factor, mscale) / mscale_of(factor, mscale_all_dim))
        else:
            attention_factor = mscale_of(factor)
    beta_fast, beta_slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

    def correction_dim(rotations):
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    keep = 1 - ramp  # how much of each frequency stays as trained (extrapolated)
    return interpolation * (1 - keep) + extrapolation * keep, attention_factor


def _longrope(rope: Rope, seq_len) -> tuple[torch.Tensor, float]:
    base, dim, original = rope.theta, rope.dim, rope.get("original_max_position_embeddings")
    factor, attention_factor = rope.get("factor"), rope.get("attention_factor")
    if factor is None:
        factor = rope.max_positions / original
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    # transformers initialises the short factors, then sets long or short ones before each pass
    long = seq_len is not None and seq_len > original
    factors = torch.tensor(rope.get("long_factor" if long else "short_factor"), dtype=torch.float32)
    shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    return 1.0 / (factors * base**shape), attention_factor


def _llama3(rope: Rope, seq_len) -> tuple[torch.Tensor, float]:
    inv_freq = _base(rope.theta, rope.dim)
    factor, low_factor, high_factor = rope.get("factor"), rope.get("low_freq_factor"), rope.get("high_freq_factor")
    old_context = rope.get("original_max_position_embeddings")
    low_wavelen, high_wavelen = old_context / low_factor, old_context / high_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low_factor) / (high_factor - low_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled), 1.0


_KINDS = {"linear": _linear, "dynamic": _dynamic, "yarn": _yarn, "longrope": _longrope, "llama3": _llama3}
