"""Attention of the native forward on a CPU (and its CUDA call): which kernel runs it, by shape.

Why apart from the products (`cpu_kernels`): a decode step's attention is small, and on a CPU its
cost is the calls around the arithmetic, which differ by dtype, rows and columns more than by
model. bfloat16 attention of a few positions a row runs as two matrix products and a float32
softmax (`_two_products`); a single row takes the fused kernel where that measures faster
(`single_row_sdpa_wins`), or, up to WIDENED_COLUMNS cache columns, the fused kernel in float32
(`single_row_widened_wins`: widening the few hundred columns costs less than bfloat16's calls);
float32, long queries and CUDA take the fused kernel. Each choice is measured once per machine
(`cpu_kernels.machine_probe`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from sgcli.engine.cpu_kernels import _best_cpu_time, machine_probe
from sgcli.engine.kernel_probes import Measured

# Up to this many new positions a row, bfloat16 attention on a CPU runs as two matrix products
# and a softmax instead of `scaled_dot_product_attention`, whose CPU kernel is pathological there
# with several rows: 16 rows x 1 position over 101 columns took 1323 us against 120 (4 positions:
# 679 against 192; 16: 1524 against 565), while at 64 positions it wins (6704 against 8248).
# float32 keeps the fused kernel: the two products won only at some shapes there (16 x 1: 151
# against 179 us; 1 x 1: 29 against 15), and float32 outputs stay as they were
# (docs/performance.md, "Zen 5").
SHORT_QUERIES = 16


def measure_single_row_sdpa(repeats: int = 3) -> Measured:
    """Whether `scaled_dot_product_attention` in bfloat16 takes less CPU time here than the two
    products for one row (a single stream's step: 1 position over 128 columns, SmolLM2's 9 heads
    sharing 3; best of `repeats` of 20 calls, by a tenth at least; measured once a process, ~20 ms).

    Why measured: the fused kernel's pathology was with several rows (Zen 5, above). With one
    row, on an Intel Xeon with AMX, it took 20 us against 100 for the two products (1 x 16
    positions: 120 against 163), whose ~10 calls cost more than their arithmetic; a CPU where
    it does not win keeps the products (docs/performance.md, "AMX, again")."""
    q = torch.linspace(-1, 1, 9 * 64).view(1, 9, 1, 64).bfloat16()
    k = torch.linspace(1, -1, 3 * 128 * 64).view(1, 3, 128, 64).bfloat16()
    with torch.inference_mode():
        fused = _best_cpu_time(lambda: F.scaled_dot_product_attention(q, k, k, enable_gqa=True), repeats, 20)
        products = _best_cpu_time(lambda: _two_products(q, k, k, None, 128), repeats, 20)
        return Measured(fused < 0.9 * products, fused, products)


single_row_sdpa_wins = machine_probe("single-row-sdpa")(measure_single_row_sdpa)

# Up to this many cache columns, one row's bfloat16 attention may run in float32 (query, keys and
# values widened, then the fused kernel): widening costs per column, bfloat16's calls per step. On
# Zen 5, one thread, SmolLM2's 9 heads over 3: 16 / 21 / 30 / 51 / 96 us at 30 / 100 / 200 / 400 /
# 800 columns, against the two products' 45 / 45 / 49 / 55 / 68 (the fused bfloat16 kernel: 27 /
# 73 / 136 / 273 / 587); a single stream's decode gained 6% (62.7 -> 66.6 tok/s, 64-112 columns).
# Past ~400 columns the products win there: the cap keeps well inside that.
WIDENED_COLUMNS = 256


def measure_single_row_widened(repeats: int = 3) -> Measured:
    """Whether one row's bfloat16 attention widened to float32 (`_widened`) takes less CPU time here
    than the faster bfloat16 way (the fused kernel or the two products), at 128 columns (best of
    `repeats` of 20 calls, by a tenth at least). Its outputs round once, at the end: closer to
    float32 attention than the bfloat16 ways, whose scores and weights round too."""
    q = torch.linspace(-1, 1, 9 * 64).view(1, 9, 1, 64).bfloat16()
    k = torch.linspace(1, -1, 3 * 128 * 64).view(1, 3, 128, 64).bfloat16()
    with torch.inference_mode():
        widened = _best_cpu_time(lambda: _widened(q, k, k, None, 128), repeats, 20)
        fused = _best_cpu_time(lambda: F.scaled_dot_product_attention(q, k, k, enable_gqa=True), repeats, 20)
        products = _best_cpu_time(lambda: _two_products(q, k, k, None, 128), repeats, 20)
        return Measured(widened < 0.9 * min(fused, products), widened, min(fused, products))


single_row_widened_wins = machine_probe("single-row-widened")(measure_single_row_widened)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    columns: int | None = None,
    scale: float | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Attention of q [rows, heads, positions, head width] over k and v [rows, kv heads, columns,
    head width], of which the first `columns` are the cache's (all by default; the rest are spare
    buffer columns, never attended to), under the additive `mask` over those (None: nothing
    masked). Heads share kv heads in groups as in transformers (head h reads kv head
    h // (heads / kv heads)). Scores are scaled by `scale` (None: 1 / sqrt(head width)); with
    `softcap` (Gemma 2) they are soft-capped before the mask, as transformers' eager attention
    does: the fused kernel cannot cap them."""
    rows, heads, length, width = q.shape
    kv_heads, total = k.shape[1], k.shape[-2]
    columns = total if columns is None else columns
    if softcap is not None:
        return _capped(q, k[..., :columns, :], v[..., :columns, :], mask, scale or width**-0.5, softcap)
    fused = q.dtype != torch.bfloat16 or q.device.type != "cpu" or length > SHORT_QUERIES
    if not fused and rows == 1 and columns <= WIDENED_COLUMNS and single_row_widened_wins():
        return _widened(q, k, v, mask, columns, scale)
    if fused or (rows == 1 and single_row_sdpa_wins()):
        k, v = k[..., :columns, :], v[..., :columns, :]
        if q.device.type == "cuda":
            with _without_cudnn_attention():
                return F.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, enable_gqa=heads != kv_heads, scale=scale
                )
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=heads != kv_heads, scale=scale)
    return _two_products(q, k, v, mask, columns, scale)


def _without_cudnn_attention():
    """SDPA on CUDA with every backend but cuDNN's. Measured on an H200 (torch 2.11, cu130, 2026-12-04):
    cuDNN's attention failed a batch step (`mha_graph.execute(...) is_good()`) on the ragged path's
    sliced queries, mask and cache views, which the efficient and math kernels take."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    return sdpa_kernel(backends)


def _capped(q, k, v, mask, scale: float, softcap: float) -> torch.Tensor:
    """Soft-capped attention in transformers' eager order: scores in the inputs' dtype, scaled,
    capped (tanh(s / cap) * cap), masked, a float32 softmax cast back, then the values."""
    rows, heads, length, width = q.shape
    kv_heads, columns = k.shape[1], k.shape[-2]
    group = heads // kv_heads
    scores = torch.matmul(q.reshape(rows, kv_heads, group * length, width), k.transpose(-1, -2)) * scale
    scores = torch.tanh(scores / softcap) * softcap
    scores = scores.view(rows, kv_heads, group, length, columns)
    if mask is not None:
        scores = scores + mask[:, :, None]
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(weights.view(rows, kv_heads, group * length, columns), v).view(rows, heads, length, width)


def _two_products(q, k, v, mask, columns: int, scale: float | None = None) -> torch.Tensor:
    """bfloat16 attention as two matrix products and a float32 softmax (see `attend`)."""
    rows, heads, length, width = q.shape
    kv_heads, total = k.shape[1], k.shape[-2]
    group = heads // kv_heads
    scores = torch.matmul(q.reshape(rows, kv_heads, group * length, width), k.transpose(-1, -2))
    scores = scores.float().view(rows, kv_heads, group, length, total) * (scale or width**-0.5)
    if mask is not None:
        scores[..., :columns] += mask[:, :, None].float()
    if total > columns:
        scores[..., columns:] = torch.finfo(torch.float32).min
    weights = torch.softmax(scores, dim=-1).to(q.dtype).view(rows, kv_heads, group * length, total)
    return torch.matmul(weights, v).view(rows, heads, length, width)


def _widened(q, k, v, mask, columns: int, scale: float | None = None) -> torch.Tensor:
    """bfloat16 attention computed in float32 by the fused kernel over the first `columns` (see
    WIDENED_COLUMNS), rounded to bfloat16 once, at the end."""
    k, v = k[..., :columns, :].float(), v[..., :columns, :].float()
    mask = None if mask is None else mask.float()
    grouped = q.shape[1] != k.shape[1]
    return F.scaled_dot_product_attention(q.float(), k, v, attn_mask=mask, enable_gqa=grouped, scale=scale).to(q.dtype)
