"""GGUF tensors dequantized to float32 in numpy, bit for bit what gguf-py's `dequantize` gives.

transformers reads a .gguf through gguf-py (`gguf.quants`); sgcli's recipe (`gguf_recipe`) rebuilds
the same float32 weights at load instead of caching them, so every formula here repeats gguf-py's
float32 operations in its order: one rounding per multiply and per add, never fused (numpy does not
contract a*b+c into an FMA). The block layouts are ggml's (ggml-common.h). Types not listed fall
back to transformers' float32 copy.

numpy, not torch: the weights can then be dequantized before torch is imported, in a forked child
on another core (`gguf_recipe.start_fill`), and a chunk of blocks at a time stays in the cache
(faster on one core than torch's whole-tensor passes on two: 143 against 211 ms for the default
model's 106M Q4_1 weights, Zen 5).
"""

from __future__ import annotations

import mmap

import numpy as np

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
CHUNK_ELEMENTS = 1 << 18  # blocks are dequantized this many values at a time: 1 MB of output, in cache


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


def dequantize(raw: np.ndarray, ggml_type: int, shape: tuple[int, ...], out: np.ndarray | None = None) -> np.ndarray:
    """float32 `shape` from `raw`, the tensor's bytes (uint8, 1-D, `nbytes` long), written into `out`
    (a contiguous float32 array of as many elements) where given: fresh memory costs as much as the
    arithmetic (~0.7 s per GB on a small VM), so the recipe lays every weight into one buffer."""
    name, block, size = TYPES[ggml_type]
    count = raw.size // size * block
    if out is None:
        out = fresh_float32(count)
    with np.errstate(all="ignore"):  # a damaged block's NaN or infinite scale is gguf-py's value, quietly
        _into(raw, name, block, size, out.reshape(-1))
    return out.reshape(shape)


def fresh_float32(count: int) -> np.ndarray:
    """`count` float32 (zeros) in fresh 4 KB pages. Not `np.empty`: numpy asks the kernel for huge
    pages, which on a long-running machine it may compact memory to find, at every fault: filling
    540 MB took 2.2 s that way against 0.24 s (2-core Zen 5 VM, up 22 hours)."""
    if not hasattr(mmap, "MAP_PRIVATE"):  # pragma: no cover - Windows
        return np.zeros(count, dtype=np.float32)
    return np.frombuffer(mmap.mmap(-1, max(count, 1) * 4, flags=mmap.MAP_PRIVATE), dtype=np.float32, count=count)


def _into(raw: np.ndarray, name: str, block: int, size: int, flat: np.ndarray) -> None:
    if name == "F32":
        flat[...] = raw.view(np.float32)  # a copy: the file's mapping may go away
    elif name == "F16":
        flat[...] = raw.view(np.float16)
    elif name == "BF16":
        np.left_shift(raw.view(np.int16), 16, out=flat.view(np.int32), dtype=np.int32)
    else:
        blocks, values = raw.reshape(-1, size), flat.reshape(-1, block)
        step = max(1, CHUNK_ELEMENTS // block)
        for at in range(0, blocks.shape[0], step):
            _BLOCKS[name](blocks[at : at + step], values[at : at + step])


def _half(blocks: np.ndarray, start: int) -> np.ndarray:
    """The float16 at byte `start` of every block, as float32 (n, 1)."""
    return blocks[:, start : start + 2].copy().view(np.float16).astype(np.float32)


def _nibbles_into(qs: np.ndarray, groups: int, out: np.ndarray) -> np.ndarray:
    """uint8 (n, groups*w) -> out (n, groups*2*w): per group of w bytes, the low nibbles then the high
    ones (gguf-py's `>> [0, 4]` layout), converted on the write."""
    n = qs.shape[0]
    q = qs.reshape(n, groups, 1, -1)
    o = out.reshape(n, groups, 2, -1)
    np.bitwise_and(q, 0x0F, out=o[:, :, 0:1], casting="unsafe")
    np.right_shift(q, 4, out=o[:, :, 1:2], casting="unsafe")
    return out


def _nibbles(qs: np.ndarray, groups: int) -> np.ndarray:
    """As `_nibbles_into`, as uint8 (for the 5- and 6-bit types, whose high bits are or-ed in)."""
    n = qs.shape[0]
    q = qs.reshape(n, groups, 1, -1)
    return np.concatenate([q & 0x0F, q >> 4], axis=2).reshape(n, -1)


def _bits(qh: np.ndarray) -> np.ndarray:
    """uint8 (n, 4): the 32 bits of the little-endian word, lowest first, as uint8 (n, 32)."""
    word = qh.copy().view("<u4")  # (n, 1)
    return ((word >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)


# Small integers are exact in float32, so `float(q) - 8` is numpy's `float(int8(q) - 8)` bit for bit,
# and a product is the same bits in either order: gguf-py's `d * q` is `q *= d` here.
def _q8_0(b, o):
    o[...] = b[:, 2:].view(np.int8)
    o *= _half(b, 0)


def _q4_0(b, o):
    _nibbles_into(b[:, 2:], 1, o)
    o -= 8
    o *= _half(b, 0)


def _q4_1(b, o):
    _nibbles_into(b[:, 4:], 1, o)
    o *= _half(b, 0)
    o += _half(b, 2)


def _q5_0(b, o):
    o[...] = _nibbles(b[:, 6:], 1) | (_bits(b[:, 2:6]) << 4)
    o -= 16
    o *= _half(b, 0)


def _q5_1(b, o):
    o[...] = _nibbles(b[:, 8:], 1) | (_bits(b[:, 4:8]) << 4)
    o *= _half(b, 0)
    o += _half(b, 2)


def _k_scales(scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K/Q5_K's 12 bytes of packed 6-bit scales and mins -> two uint8 (n, 8) (gguf-py's get_scale_min)."""
    s = scales.reshape(-1, 3, 4)
    d, m, m_d = s[:, 0], s[:, 1], s[:, 2]
    sc = np.concatenate([d & 0x3F, (m_d & 0x0F) | ((d >> 2) & 0x30)], axis=-1)
    mins = np.concatenate([m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)], axis=-1)
    return sc, mins


def _k_apply(o: np.ndarray, b: np.ndarray) -> None:
    """o = (d * sc) * q - dmin * m over the 8 sub-blocks of 32 (Q4_K, Q5_K), o holding q."""
    n = b.shape[0]
    sc, mins = _k_scales(b[:, 4:16])
    view = o.reshape(n, -1, 32)
    view *= (_half(b, 0) * sc.astype(np.float32)).reshape(n, -1, 1)
    view -= (_half(b, 2) * mins.astype(np.float32)).reshape(n, -1, 1)


def _crumbs(qs: np.ndarray, n: int) -> np.ndarray:
    """64 bytes of 2-bit values (Q2_K, Q3_K; Q6_K's high bits) -> uint8 (n, 16, 16): per half of 32
    bytes, bits 0-1 of each byte, then 2-3, 4-5, 6-7 (gguf-py's `>> [0, 2, 4, 6]` layout)."""
    shifts = np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 1, 4, 1)
    return ((qs.reshape(n, 2, 1, 32) >> shifts) & 3).reshape(n, 16, 16)


def _bit_planes(qh: np.ndarray, n: int) -> np.ndarray:
    """32 bytes of 1-bit values (Q3_K's high-bit mask, Q5_K's fifth bits) -> uint8 (n, 8, 32): bit 0 of
    each byte, then bit 1, ... bit 7 (gguf-py's `>> [0, ..., 7]` layout)."""
    return (qh.reshape(n, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1


def _q2_k(b, o):
    """o = (d * scale) * q - dmin * min over 16 sub-blocks of 16, 4-bit scales and mins."""
    n = b.shape[0]
    scales = b[:, :16]
    view = o.reshape(n, 16, 16)
    view[...] = _crumbs(b[:, 16:80], n)
    view *= (_half(b, 80) * (scales & 0x0F).astype(np.float32)).reshape(n, 16, 1)
    view -= (_half(b, 82) * (scales >> 4).astype(np.float32)).reshape(n, 16, 1)


def _q3_k(b, o):
    """o = (d * (scale - 32)) * (q - 4 where the high bit is clear) over 16 sub-blocks of 16, with
    6-bit scales packed as gguf-py unpacks them (low nibbles from bytes 0-7, high pairs from 8-11)."""
    n = b.shape[0]
    packed = b[:, 96:108]
    low = (packed[:, :8].reshape(n, 1, 8) >> np.array([0, 4], dtype=np.uint8).reshape(1, 2, 1)).reshape(n, 16)
    high = (packed[:, 8:].reshape(n, 1, 4) >> np.array([0, 2, 4, 6], dtype=np.uint8).reshape(1, 4, 1)).reshape(n, 16)
    scales = ((low & 0x0F) | ((high & 0x03) << 4)).astype(np.int16) - 32  # 6 bits, offset by 32
    clear = (_bit_planes(b[:, :32], n) ^ 1).reshape(n, 16, 16)  # 1: subtract 4
    view = o.reshape(n, 16, 16)
    view[...] = _crumbs(b[:, 32:96], n).astype(np.int8) - (clear << 2).astype(np.int8)
    view *= (_half(b, 108) * scales.astype(np.float32)).reshape(n, 16, 1)


def _iq4(qs: np.ndarray, groups: int) -> np.ndarray:
    """IQ4's 4-bit values (low nibbles, then high, per group) looked up in IQ4_VALUES, as float32."""
    return np.array(IQ4_VALUES, dtype=np.float32)[_nibbles(qs, groups)]


def _iq4_nl(b, o):
    o[...] = _iq4(b[:, 2:], 1)
    o *= _half(b, 0)


def _iq4_xs(b, o):
    """o = (d * (scale - 32)) * value over 8 sub-blocks of 32, 6-bit scales: low nibbles from bytes
    4-7, high pairs from the 16-bit word at byte 2."""
    n = b.shape[0]
    low = (b[:, 4:8].reshape(n, 4, 1) >> np.array([0, 4], dtype=np.uint8)).reshape(n, 8) & 0x0F
    word = b[:, 2:4].copy().view("<u2").astype(np.int32)  # (n, 1)
    high = (word >> np.arange(0, 16, 2, dtype=np.int32)) & 0x03
    scales = (low.astype(np.int32) | (high << 4)) - 32
    view = o.reshape(n, 8, 32)
    view[...] = _iq4(b[:, 8:], 8).reshape(n, 8, 32)
    view *= (_half(b, 0) * scales.astype(np.float32)).reshape(n, 8, 1)


def _q4_k(b, o):
    _k_apply(_nibbles_into(b[:, 16:], 4, o), b)


def _q5_k(b, o):
    n = b.shape[0]
    low = _nibbles(b[:, 48:], 4).reshape(n, 8, 32)
    o.reshape(n, 8, 32)[...] = low | (_bit_planes(b[:, 16:48], n) << 4)
    _k_apply(o, b)


def _q6_k(b, o):
    n = b.shape[0]
    low = _nibbles(b[:, :128], 2).reshape(n, 8, 32)
    high = _crumbs(b[:, 128:192], n).reshape(n, 8, 32)
    scales = b[:, 192:208].view(np.int8).astype(np.float32)
    o.reshape(n, 8, 32)[...] = low | (high << 4)
    view = o.reshape(n, 16, 16)
    view -= 32
    view *= (_half(b, 208) * scales).reshape(n, 16, 1)


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
