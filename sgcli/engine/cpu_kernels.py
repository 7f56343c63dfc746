"""Which kernel runs each matrix product and each attention of the native forward on a CPU.

Why apart from the model (`sgcli.engine.llama`): the arithmetic is the model's, but on a CPU
the fastest way to run it depends on the machine, and was measured machine by machine
(docs/performance.md, "bfloat16 on the CPU", "AMX", "Zen 5"). bfloat16 products take oneDNN's
prepacked kernel (`pack`); wide passes (prefills) take torch's bfloat16 products or float32 ones,
whichever this CPU runs faster (`bf16_beats_float32`; always bfloat16 with AMX); attention of a
few positions a row in bfloat16 runs as two matrix products and a softmax (`attend`).
"""

from __future__ import annotations

import functools
import time

import torch
import torch.nn.functional as F
from torch import nn

BF16_KERNEL = "onednn-bf16"  # packed bfloat16 products; prefills widened to float32
AMX_KERNEL = "onednn-bf16-amx"  # packed bfloat16 products; prefills through torch's bfloat16 kernel on AMX tiles
# packed bfloat16 products; prefills through torch's bfloat16 kernel, measured faster than float32 on this CPU
PREFILL_BF16_KERNEL = "onednn-bf16-prefill"
# From this many rows (tokens in one pass) the packed kernel is no longer the fastest for
# SmolLM2's matrices (one thread), and widening the weight to float32 for that one call wins:
# measured on an Intel Xeon with AVX-512 BF16 only, the crossover lay between 64 and 128 rows,
# and at 1104 rows float32 took 37 ms where oneDNN took 57.
WIDE_ROWS = 128
# Where torch's bfloat16 products are the faster wide kernel (always with AMX; on other CPUs where
# `bf16_beats_float32` measures so), they take over from the packed kernel at this many rows. With
# AMX a 576 x 3072 product at 128 rows took 2.95 ms in float32, 0.54 packed, 0.69 torch's
# bfloat16, and torch's overtook the packed kernel from about 512 rows (1024 rows: 3.04 against
# 3.25 ms); a 16 x 70 prefill took 504 CPU ms with this bound, 2116 widened to float32. On an AMD
# EPYC (Zen 5, AVX-512 BF16, no AMX) both bfloat16 kernels ran ~400 GFLOP/s from 128 rows on,
# float32 88, and that prefill took 869 against 2831 ms (docs/performance.md, "AMX", "Zen 5").
WIDE_ROWS_BF16 = 512


def amx_tiles() -> bool:
    """Whether this CPU has AMX tiles, where torch's bfloat16 products of wide passes run on them."""
    return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())


@functools.cache
def bf16_beats_float32(rows: int = 256, inputs: int = 1024, outputs: int = 2048, repeats: int = 3) -> bool:
    """Whether torch's bfloat16 product of a wide pass (`rows` tokens, a weight of `outputs` x
    `inputs`) takes less CPU time on this CPU than widening both to float32, as prefills do
    otherwise (best of `repeats`; measured once a process, on a fixed shape: it is the CPU's
    answer, not a model's).

    Why measured: CPUs with AVX-512 BF16 and no AMX differ by 7x between them. On an Intel Xeon
    float32 won (37 against 57 ms at 1104 rows); on an AMD EPYC (Zen 5) bfloat16 was 4.6x faster.
    No CPU flag told them apart, and the margins are wide enough not to flip with load."""
    weight = torch.linspace(-1, 1, outputs * inputs).view(outputs, inputs).bfloat16()
    x = torch.linspace(1, -1, rows * inputs).view(rows, inputs).bfloat16()

    def best(product) -> float:
        product()
        times = []
        for _ in range(repeats):
            t = time.process_time()
            product()
            times.append(time.process_time() - t)
        return min(times)

    with torch.inference_mode():
        return best(lambda: F.linear(x, weight)) < best(lambda: F.linear(x.float(), weight.float()))


def bf16_kernel_problem() -> str | None:
    """Why oneDNN's prepacked bfloat16 matrix products cannot run here (None when they can)."""
    ops = getattr(torch.ops, "mkldnn", None)
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN"
    if ops is None or not all(hasattr(ops, op) for op in ("_reorder_linear_weight", "_linear_pointwise")):
        return "this torch build lacks oneDNN's prepacked linear"
    units = [
        getattr(torch.cpu, check, lambda: False)() for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    ]
    if not any(units) or not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "this CPU has no bfloat16 dot-product instructions (AVX-512 BF16 or AMX)"
    return None


def _available_memory() -> float:
    """Bytes of memory the system can still give (MemAvailable); infinite where it cannot say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return float("inf")


def meta_parameter(*shape: int) -> nn.Parameter:
    """A weight with no storage yet (`load` assigns it). Built directly on the meta device: nn's
    layers would initialise it, and initialising on meta imports torch's compiler (1.6 s)."""
    return nn.Parameter(torch.empty(shape, device="meta"), requires_grad=False)


class Linear(nn.Module):
    """`nn.Linear` without a bias, built uninitialised. `packed`: its weight in oneDNN's blocked
    layout (`pack`), used for bfloat16 inputs on the CPU."""

    bias = None
    packed: torch.Tensor | None = None
    wide_bf16 = False  # with `packed`: wide passes take torch's bfloat16 products, not float32 ones

    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.weight = meta_parameter(outputs, inputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and x.dtype == torch.bfloat16 and x.device.type == "cpu":
            if x.numel() < (WIDE_ROWS_BF16 if self.wide_bf16 else WIDE_ROWS) * x.shape[-1]:
                return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [None], "")
            if not self.wide_bf16:  # a prefill where float32 is faster: weight widened per call
                return F.linear(x.float(), self.weight.float()).to(torch.bfloat16)
        return F.linear(x, self.weight)


def pack(linears: list[Linear], probe_with: Linear) -> str | None:
    """Give `linears` oneDNN's prepacked bfloat16 kernel, checked on `probe_with` (one of them);
    returns its name, or None (products stay `F.linear`) where it does not apply: another dtype
    or device, or a torch or CPU without oneDNN's bfloat16 support (`bf16_kernel_problem`).

    Why: torch's `F.linear` in bfloat16 on a CPU does not reach the bf16 dot-product units
    (AVX-512 BF16, AMX) for these shapes: measured on an Intel Xeon with avx512_bf16, a
    single-token pass took 78 ms in bfloat16 and 267 ms for a 4-token draft, against 49 and
    55 ms with packed weights and 73 and 112 ms in float32 (docs/performance.md). Prefills take
    torch's bfloat16 products from WIDE_ROWS_BF16 rows where those are faster than float32
    (always with AMX; measured elsewhere: `bf16_beats_float32`), float32 ones from WIDE_ROWS
    rows where they are not. The packed copies sit beside the weights (the model's bfloat16
    matrices, twice), which the output head and `state_dict` still read."""
    weight = probe_with.weight
    if weight.dtype != torch.bfloat16 or weight.device.type != "cpu" or bf16_kernel_problem() is not None:
        return None
    size = sum(linear.weight.numel() * linear.weight.element_size() for linear in linears)
    if size > _available_memory() / 2:  # the copies would crowd out the KV cache: torch's kernel instead
        return None
    amx = amx_tiles()
    wide_bf16 = amx or bf16_beats_float32()
    for linear in linears:
        linear.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), 1)
        linear.wide_bf16 = wide_bf16
    probe = torch.linspace(-1, 1, weight.shape[1], dtype=torch.bfloat16)[None]
    with torch.inference_mode():
        got, expected = probe_with(probe).float(), F.linear(probe, weight).float()
    if not torch.allclose(got, expected, rtol=2e-2, atol=2e-2):  # a kernel that computes otherwise: not used
        for linear in linears:
            linear.packed = None
        return None
    return AMX_KERNEL if amx else PREFILL_BF16_KERNEL if wide_bf16 else BF16_KERNEL


# Up to this many new positions a row, bfloat16 attention on a CPU runs as two matrix products
# and a softmax instead of `scaled_dot_product_attention`, whose CPU kernel is pathological there
# with several rows: 16 rows x 1 position over 101 columns took 1323 us against 120 (4 positions:
# 679 against 192; 16: 1524 against 565), while at 64 positions it wins (6704 against 8248).
# float32 keeps the fused kernel: the two products won only at some shapes there (16 x 1: 151
# against 179 us; 1 x 1: 29 against 15), and float32 outputs stay as they were
# (docs/performance.md, "Zen 5").
SHORT_QUERIES = 16


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, columns: int | None = None
) -> torch.Tensor:
    """Attention of q [rows, heads, positions, head width] over k and v [rows, kv heads, columns,
    head width], of which the first `columns` are the cache's (all by default; the rest are spare
    buffer columns, never attended to), under the additive `mask` over those (None: nothing
    masked). Heads share kv heads in groups as in transformers (head h reads kv head
    h // (heads / kv heads))."""
    rows, heads, length, width = q.shape
    kv_heads, total = k.shape[1], k.shape[-2]
    columns = total if columns is None else columns
    if q.dtype != torch.bfloat16 or q.device.type != "cpu" or length > SHORT_QUERIES:
        k, v = k[..., :columns, :], v[..., :columns, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=heads != kv_heads)
    group = heads // kv_heads
    scores = torch.matmul(q.reshape(rows, kv_heads, group * length, width), k.transpose(-1, -2))
    scores = scores.float().view(rows, kv_heads, group, length, total) * width**-0.5
    if mask is not None:
        scores[..., :columns] += mask[:, :, None].float()
    if total > columns:
        scores[..., columns:] = torch.finfo(torch.float32).min
    weights = torch.softmax(scores, dim=-1).to(q.dtype).view(rows, kv_heads, group * length, total)
    return torch.matmul(weights, v).view(rows, heads, length, width)
