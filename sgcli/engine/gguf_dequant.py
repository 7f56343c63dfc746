"""GGUF tensors dequantized to float32 in torch, bit for bit what gguf-py's numpy `dequantize` gives.

transformers reads a .gguf through gguf-py (`gguf.quants`); sgcli's recipe (`gguf_recipe`) rebuilds
the same float32 weights at load instead of caching them, so every formula here repeats gguf-py's
float32 operations in its order: one rounding per multiply and per add, never fused (numpy does not
contract a*b+c into an FMA, and torch's elementwise `mul_`/`add_` do not either). The block layouts
are ggml's (ggml-common.h). Types not listed fall back to transformers' float32 copy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# ggml type id -> (name, elements per block, bytes per block), as gguf.constants.GGML_QUANT_SIZES
TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    30: ("BF16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    20: ("IQ4_NL", 32, 18),
    23: ("IQ4_XS", 256, 136),
}
# IQ4_NL and IQ4_XS map each 4-bit value through this table (ggml's kvalues_iq4nl)
IQ4_VALUES = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


def nbytes(ggml_type: int, shape: tuple[int, ...]) -> int:
    """Bytes a tensor of `shape` takes in the file (ValueError for a type or row size this module lacks)."""
    if ggml_type not in TYPES:
        raise ValueError(f"ggml type {ggml_type} is not dequantized by sgcli")
    _, block, size = TYPES[ggml_type]
    elements = 1
    for dim in shape:
        elements *= dim
    if not shape or shape[-1] % block:
        raise ValueError(f"rows of {shape[-1] if shape else 0} elements are not whole {TYPES[ggml_type][0]} blocks")
    return elements // block * size


def dequantize(raw: torch.Tensor, ggml_type: int, shape: tuple[int, ...], out: torch.Tensor | None = None):
    """float32 `shape` from `raw`, the tensor's bytes (uint8, 1-D, `nbytes` long), written into `out`
    (a contiguous float32 tensor of as many elements) where given: fresh memory costs as much as the
    arithmetic (~0.7 s per GB on a small VM), so the recipe lays every weight into one buffer."""
    import torch

    name, block, size = TYPES[ggml_type]
    count = raw.numel() // size * block
    if out is None:
        out = torch.empty(count, dtype=torch.float32)
    flat = out.view(-1)
    if name == "F32":
        flat.copy_(raw.view(torch.float32))  # a copy: the file's mapping may go away
    elif name == "F16":
        _f16_into(raw, flat)
    elif name == "BF16":
        flat.view(torch.int32).copy_(raw.view(torch.int16)).bitwise_left_shift_(16)
    else:
        _BLOCKS[name](raw.view(-1, size), flat.view(-1, block))
    return out.view(shape)


def _f16_into(raw: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """float16 bytes widened by numpy, as gguf-py does: torch turns a signalling NaN into 0x7fffffff
    where numpy keeps its payload (0xfd4d -> 0xffa9a000), and the results must be the same bits."""
    import numpy as np

    out.numpy()[...] = raw.contiguous().numpy().view(np.float16).reshape(out.shape)
    return out


def _half(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """The float16 at byte `start` of every block, as float32 (n, 1): widened by torch, read in
    place, unless one is NaN (a damaged file), where numpy's widening keeps the payload."""
    import torch

    halves = blocks[:, start : start + 2].view(torch.float16)  # blocks have even sizes: no copy
    wide = halves.to(torch.float32)
    if bool(wide.isnan().any()):
        return _f16_into(halves.view(torch.uint8), wide)
    return wide


def _nibbles_into(qs: torch.Tensor, groups: int, out: torch.Tensor) -> torch.Tensor:
    """uint8 (n, groups*w) -> out (n, groups*2*w): per group of w bytes, the low nibbles then the high
    ones (gguf-py's `>> [0, 4]` layout), converted on the copy."""
    n = qs.shape[0]
    q = qs.reshape(n, groups, 1, -1)
    o = out.view(n, groups, 2, -1)
    o[:, :, 0:1].copy_(q & 0x0F)
    o[:, :, 1:2].copy_(q >> 4)
    return out


def _bits(qh: torch.Tensor) -> torch.Tensor:
    """uint8 (n, 4): the 32 bits of the little-endian word, lowest first, as uint8 (n, 32)."""
    import torch

    word = qh.contiguous().view(torch.int32)  # (n, 1); an arithmetic shift is harmless under & 1
    return ((word >> torch.arange(32, dtype=torch.int32)) & 1).to(torch.uint8)


def _nibbles(qs: torch.Tensor, groups: int) -> torch.Tensor:
    """As `_nibbles_into`, as uint8 (for the 5- and 6-bit types, whose high bits are or-ed in)."""
    import torch

    n = qs.shape[0]
    q = qs.reshape(n, groups, 1, -1)
    return torch.cat([q & 0x0F, q >> 4], dim=2).reshape(n, -1)


# Small integers are exact in float32, so `float(q) - 8` is numpy's `float(int8(q) - 8)` bit for bit.
def _q8_0(b, o):
    import torch

    o.copy_(b[:, 2:].view(torch.int8)).mul_(_half(b, 0))


def _q4_0(b, o):
    _nibbles_into(b[:, 2:], 1, o).sub_(8).mul_(_half(b, 0))


def _q4_1(b, o):
    _then(_nibbles_into(b[:, 4:], 1, o).mul_(_half(b, 0)), "add_", _half(b, 2))


def _q5_0(b, o):
    o.copy_(_nibbles(b[:, 6:], 1) | (_bits(b[:, 2:6]) << 4)).sub_(16).mul_(_half(b, 0))


def _q5_1(b, o):
    _then(o.copy_(_nibbles(b[:, 8:], 1) | (_bits(b[:, 4:8]) << 4)).mul_(_half(b, 0)), "add_", _half(b, 2))


def _k_scales(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K/Q5_K's 12 bytes of packed 6-bit scales and mins -> two uint8 (n, 8) (gguf-py's get_scale_min)."""
    import torch

    s = scales.reshape(-1, 3, 4)
    d, m, m_d = s[:, 0], s[:, 1], s[:, 2]
    sc = torch.cat([d & 0x3F, (m_d & 0x0F) | ((d >> 2) & 0x30)], dim=-1)
    mins = torch.cat([m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)], dim=-1)
    return sc, mins


def _k_apply(o: torch.Tensor, b: torch.Tensor) -> None:
    """o = (d * sc) * q - dmin * m over the 8 sub-blocks of 32 (Q4_K, Q5_K), o holding q."""
    import torch

    n = b.shape[0]
    sc, mins = _k_scales(b[:, 4:16])
    d = (_half(b, 0) * sc.to(torch.float32)).reshape(n, -1, 1)
    dm = (_half(b, 2) * mins.to(torch.float32)).reshape(n, -1, 1)
    _then(o.view(n, -1, 32).mul_(d), "sub_", dm)


def _then(x: torch.Tensor, op: str, other: torch.Tensor) -> torch.Tensor:
    """`x.add_(other)` or `x.sub_(other)` in place, NaN for NaN as numpy: where both are NaN numpy's
    broadcast loop keeps x's, torch's the other's. Only a damaged file has NaN scales; the check
    reads the small `other` alone."""
    if not bool(other.isnan().any()):
        return getattr(x, op)(other)
    nan = x.isnan()
    kept = x[nan]
    getattr(x, op)(other)[nan] = kept
    return x


def _crumbs(qs: torch.Tensor, n: int) -> torch.Tensor:
    """64 bytes of 2-bit values (Q2_K, Q3_K; Q6_K's high bits) -> uint8 (n, 16, 16): per half of 32
    bytes, bits 0-1 of each byte, then 2-3, 4-5, 6-7 (gguf-py's `>> [0, 2, 4, 6]` layout)."""
    import torch

    shifts = torch.tensor([0, 2, 4, 6], dtype=torch.uint8).reshape(1, 1, 4, 1)
    return ((qs.reshape(n, 2, 1, 32) >> shifts) & 3).reshape(n, 16, 16)


def _bit_planes(qh: torch.Tensor, n: int) -> torch.Tensor:
    """32 bytes of 1-bit values (Q3_K's high-bit mask, Q5_K's fifth bits) -> uint8 (n, 8, 32): bit 0 of
    each byte, then bit 1, ... bit 7 (gguf-py's `>> [0, ..., 7]` layout)."""
    import torch

    return (qh.reshape(n, 1, 32) >> torch.arange(8, dtype=torch.uint8).reshape(1, 8, 1)) & 1


def _q2_k(b, o):
    """o = (d * scale) * q - dmin * min over 16 sub-blocks of 16, 4-bit scales and mins."""
    import torch

    n = b.shape[0]
    scales = b[:, :16]
    o.view(n, 16, 16).copy_(_crumbs(b[:, 16:80], n))
    dl = (_half(b, 80) * (scales & 0x0F).to(torch.float32)).reshape(n, 16, 1)
    ml = (_half(b, 82) * (scales >> 4).to(torch.float32)).reshape(n, 16, 1)
    _then(o.view(n, 16, 16).mul_(dl), "sub_", ml)


def _q3_k(b, o):
    """o = (d * (scale - 32)) * (q - 4 where the high bit is clear) over 16 sub-blocks of 16, with
    6-bit scales packed as gguf-py unpacks them (low nibbles from bytes 0-7, high pairs from 8-11)."""
    import torch

    n = b.shape[0]
    packed = b[:, 96:108]
    low = (packed[:, :8].reshape(n, 1, 8) >> torch.tensor([0, 4], dtype=torch.uint8).reshape(1, 2, 1)).reshape(n, 16)
    high = (packed[:, 8:].reshape(n, 1, 4) >> torch.tensor([0, 2, 4, 6], dtype=torch.uint8).reshape(1, 4, 1)).reshape(
        n, 16
    )
    scales = ((low & 0x0F) | ((high & 0x03) << 4)).to(torch.int16) - 32  # 6 bits, offset by 32
    dl = (_half(b, 108) * scales.to(torch.float32)).reshape(n, 16, 1)
    clear = (_bit_planes(b[:, :32], n) ^ 1).reshape(n, 16, 16)  # 1: subtract 4
    o.view(n, 16, 16).copy_(_crumbs(b[:, 32:96], n).to(torch.int8) - (clear << 2).to(torch.int8))
    o.view(n, 16, 16).mul_(dl)


def _iq4(qs: torch.Tensor, groups: int) -> torch.Tensor:
    """IQ4's 4-bit values (low nibbles, then high, per group) looked up in IQ4_VALUES, as float32."""
    import torch

    return torch.tensor(IQ4_VALUES, dtype=torch.float32)[_nibbles(qs, groups).long()]


def _iq4_nl(b, o):
    o.copy_(_iq4(b[:, 2:], 1)).mul_(_half(b, 0))


def _iq4_xs(b, o):
    """o = (d * (scale - 32)) * value over 8 sub-blocks of 32, 6-bit scales: low nibbles from bytes
    4-7, high pairs from the 16-bit word at byte 2."""
    import torch

    n = b.shape[0]
    low = (b[:, 4:8].reshape(n, 4, 1) >> torch.tensor([0, 4], dtype=torch.uint8)).reshape(n, 8) & 0x0F
    word = b[:, 2:4].contiguous().view(torch.int16).to(torch.int32) & 0xFFFF  # (n, 1)
    high = (word >> torch.arange(0, 16, 2, dtype=torch.int32)) & 0x03
    scales = (low.to(torch.int32) | (high << 4)) - 32
    dl = (_half(b, 0) * scales.to(torch.float32)).reshape(n, 8, 1)
    o.view(n, 8, 32).copy_(_iq4(b[:, 8:], 8).reshape(n, 8, 32)).mul_(dl)


def _q4_k(b, o):
    _k_apply(_nibbles_into(b[:, 16:], 4, o), b)


def _q5_k(b, o):

    n = b.shape[0]
    low = _nibbles(b[:, 48:], 4).reshape(n, 8, 32)
    o.view(n, 8, 32).copy_(low | (_bit_planes(b[:, 16:48], n) << 4))
    _k_apply(o, b)


def _q6_k(b, o):
    import torch

    n = b.shape[0]
    low = _nibbles(b[:, :128], 2).reshape(n, 8, 32)
    high = _crumbs(b[:, 128:192], n).reshape(n, 8, 32)
    scales = b[:, 192:208].view(torch.int8).to(torch.float32)
    d = (_half(b, 208) * scales).reshape(n, 16, 1)
    o.view(n, 8, 32).copy_(low | (high << 4))
    o.view(n, 16, 16).sub_(32).mul_(d)


_BLOCKS = {
    "Q4_0": _q4_0,
    "Q4_1": _q4_1,
    "Q5_0": _q5_0,
    "Q5_1": _q5_1,
    "Q8_0": _q8_0,
    "Q2_K": _q2_k,
    "Q3_K": _q3_k,
    "Q4_K": _q4_k,
    "Q5_K": _q5_k,
    "Q6_K": _q6_k,
    "IQ4_NL": _iq4_nl,
    "IQ4_XS": _iq4_xs,
}
