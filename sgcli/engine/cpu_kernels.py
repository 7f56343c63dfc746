"""Which kernel runs each matrix product of the native forward on a CPU (attention: `cpu_attention`).

Why apart from the model (`sgcli.engine.llama`): the arithmetic is the model's, but on a CPU
the fastest way to run it depends on the machine, and was measured machine by machine
(docs/performance.md, "bfloat16 on the CPU", "AMX", "Zen 5"). bfloat16 products take oneDNN's
prepacked kernel (`pack`); wide passes (prefills) take torch's bfloat16 products or float32 ones,
whichever this CPU runs faster (`bf16_beats_float32`; always bfloat16 with AMX). float32
products take oneDNN's packed float32 kernel where it measures faster than torch's own (MKL),
measured apart for a few rows (drafts, batch steps: `packed_float32_wins`), a single row
(`packed_float32_single_wins`) and wide passes (prefills: `packed_float32_wide_wins`).

Each measured choice is measured once per machine and remembered (`sgcli.engine.kernel_probes`),
so a near tie cannot flip between runs with the machine's load; `--kernel` (`pack`'s `choice`)
pins the products' kernel outright.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from sgcli.engine import kernel_probes
from sgcli.engine.flags import AMX_KERNEL, BF16_KERNEL, F32_KERNEL, PREFILL_BF16_KERNEL, TORCH_KERNEL
from sgcli.engine.kernel_probes import Measured
from sgcli.errors import UserError

# The kernels (names in sgcli.engine.flags, which --kernel reads without torch): BF16_KERNEL packs
# bfloat16 products and widens prefills to float32; AMX_KERNEL packs them and runs prefills through
# torch's bfloat16 kernel on AMX tiles; PREFILL_BF16_KERNEL packs them and runs prefills through
# torch's bfloat16 kernel, measured faster than float32 on this CPU; F32_KERNEL below.
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
# F32_KERNEL: float32 products through oneDNN's packed float32 kernel, in the row ranges where it
# measured faster. Passes of 2 to FEW_ROWS rows (a draft, a batch step): `packed_float32_wins`;
# a single row: `packed_float32_single_wins`; more rows (prefills): `packed_float32_wide_wins`.
# Measured apart because CPUs differ by range. On an AMD EPYC (Zen 3, AVX2, no bf16 units), one
# thread: SmolLM2's 576 -> 3072 product at 2 / 4 / 16 / 32 / 64 rows took 0.317 / 0.455 / 0.911 /
# 1.584 / 2.989 ms through torch (MKL) and 0.192 / 0.300 / 0.792 / 1.561 / 3.304 packed, and at
# one row packed lost (0.184 against 0.167 ms) (docs/performance.md, "Zen 3"). On an AMD EPYC
# (Zen 5, AVX-512), 2 threads, packed won in every range: 1.7x at one row, 2.4x at 16, 2.2-2.5x
# from 256 rows on (435 GFLOP/s against MKL's 175-190), 2-4x for the output head.
FEW_ROWS = 32
WIDE_PROBE_ROWS = 256  # the wide probe's rows: a prefill's width
# Only float32 weights this large get a packed copy: oneDNN's call costs ~25 us more than MKL's, which
# ate the gain below it (576 x 576 at 4 rows: 0.083 against 0.087 ms; 192 x 576: 0.048 against 0.029),
# while 960 x 576, SmolLM2's query-key-value product, took 0.140 against 0.198.
F32_PACK_MIN = 256 * 1024


def amx_tiles() -> bool:
    """Whether this CPU has AMX tiles, where torch's bfloat16 products of wide passes run on them."""
    return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())


def _best_cpu_time(product, repeats: int, calls: int = 1) -> float:
    """The least CPU time of `repeats` samples of `calls` calls of `product`, after one call to warm it."""
    product()
    times = []
    for _ in range(repeats):
        t = time.process_time()
        for _ in range(calls):
            product()
        times.append(time.process_time() - t)
    return min(times)


def machine_probe(name: str) -> Callable[[Callable[[], Measured]], Callable[[], bool]]:
    """A probe answered once a process (`functools.cache`), from the machine's remembered measurement
    (`kernel_probes.remembered`) where there is one; `measure_...` functions take the measurement itself."""

    def decorate(measure: Callable[[], Measured]) -> Callable[[], bool]:
        @functools.cache
        def probe() -> bool:
            machine = kernel_probes.machine_id(torch.get_num_threads(), torch.__version__)
            return kernel_probes.remembered(name, measure, machine)

        probe.__doc__ = measure.__doc__
        return probe

    return decorate


def measure_bf16_prefill(rows: int = 256, inputs: int = 1024, outputs: int = 2048, repeats: int = 3) -> Measured:
    """Whether torch's bfloat16 product of a wide pass (`rows` tokens, a weight of `outputs` x
    `inputs`) takes less CPU time on this CPU than widening both to float32, as prefills do
    otherwise (best of `repeats`; measured once a process, on a fixed shape: it is the CPU's
    answer, not a model's).

    Why measured: CPUs with AVX-512 BF16 and no AMX differ by 7x between them. On an Intel Xeon
    float32 won (37 against 57 ms at 1104 rows); on an AMD EPYC (Zen 5) bfloat16 was 4.6x faster.
    No CPU flag told them apart, and the margins are wide enough not to flip with load."""
    weight = torch.linspace(-1, 1, outputs * inputs).view(outputs, inputs).bfloat16()
    x = torch.linspace(1, -1, rows * inputs).view(rows, inputs).bfloat16()
    with torch.inference_mode():
        bf16 = _best_cpu_time(lambda: F.linear(x, weight), repeats)
        wide = _best_cpu_time(lambda: F.linear(x.float(), weight.float()), repeats)
        return Measured(bf16 < wide, bf16, wide)


bf16_beats_float32 = machine_probe("bf16-prefill")(measure_bf16_prefill)


def measure_packed_float32(rows: int = 4, inputs: int = 576, outputs: int = 3072, repeats: int = 3) -> Measured:
    """Whether oneDNN's packed float32 product of `rows` rows (a weight of `outputs` x `inputs`)
    takes less CPU time on this CPU than torch's own, by a tenth at least (best of `repeats` of
    up to 10 calls; measured once per machine and remembered, ~0.2 s, most of it oneDNN's first
    call, which the first forward would pay otherwise).

    Why measured: torch's float32 products are MKL's, which on an AMD EPYC (Zen 3) ran a few rows
    1.2-1.7x slower than oneDNN's packed kernel but one row faster, and on a Zen 5 ran every
    width 1.7-2.5x slower; other CPUs need not. The tenth keeps a near tie from flipping with load."""
    if onednn_problem() is not None:
        return Measured(False, float("inf"), 0.0)
    weight = torch.linspace(-1, 1, outputs * inputs).view(outputs, inputs)
    x = torch.linspace(1, -1, rows * inputs).view(rows, inputs)
    calls = max(1, min(10, 40 // rows))
    with torch.inference_mode():
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS_HINT)
        onednn = _best_cpu_time(
            lambda: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [None], ""), repeats, calls
        )
        mkl = _best_cpu_time(lambda: F.linear(x, weight), repeats, calls)
        return Measured(onednn < 0.9 * mkl, onednn, mkl)


def measure_packed_float32_single() -> Measured:
    """`measure_packed_float32` for a single row (a lone stream's decode step)."""
    return measure_packed_float32(rows=1)


def measure_packed_float32_wide() -> Measured:
    """`measure_packed_float32` for a wide pass (WIDE_PROBE_ROWS rows: a prefill)."""
    return measure_packed_float32(rows=WIDE_PROBE_ROWS)


packed_float32_wins = machine_probe("packed-float32")(measure_packed_float32)
packed_float32_single_wins = machine_probe("packed-float32-single")(measure_packed_float32_single)
packed_float32_wide_wins = machine_probe("packed-float32-wide")(measure_packed_float32_wide)
# oneDNN's rows hint for a packed float32 weight: one packing serves every width, within 8% of a
# packing for that width (Zen 5, 256 and 1024 rows)
PACK_ROWS_HINT = 4


def onednn_problem() -> str | None:
    """Why oneDNN's prepacked matrix products cannot run in this torch (None when they can)."""
    ops = getattr(torch.ops, "mkldnn", None)
    if not torch.backends.mkldnn.is_available():
        return "this torch build has no oneDNN"
    if ops is None or not all(hasattr(ops, op) for op in ("_reorder_linear_weight", "_linear_pointwise")):
        return "this torch build lacks oneDNN's prepacked linear"
    return None


def bf16_kernel_problem() -> str | None:
    """Why oneDNN's prepacked bfloat16 matrix products cannot run here (None when they can)."""
    if (problem := onednn_problem()) is not None:
        return problem
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
    """`nn.Linear`, built uninitialised (a bias where `bias`). `packed`: its weight in oneDNN's
    blocked layout (`pack`), used on the CPU for inputs of its dtype whose rows (tokens in the
    pass) lie in `packed_rows` [first, end): bfloat16 ones below the wide bounds, float32 ones in
    the ranges where the packed kernel measured faster."""

    packed: torch.Tensor | None = None
    packed_rows: tuple[int, float] = (1, 0)
    wide_bf16 = False  # with `packed`: wide passes take torch's bfloat16 products, not float32 ones

    def __init__(self, inputs: int, outputs: int, bias: bool = False):
        super().__init__()
        self.weight = meta_parameter(outputs, inputs)
        self.bias = meta_parameter(outputs) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        packed = self.packed
        if packed is not None and x.dtype == packed.dtype and x.device.type == "cpu":
            first, end = self.packed_rows
            if first <= x.numel() // x.shape[-1] < end:
                return torch.ops.mkldnn._linear_pointwise(x, packed, self.bias, "none", [None], "")
            if x.dtype == torch.bfloat16 and not self.wide_bf16:  # a prefill where float32 is faster
                bias = None if self.bias is None else self.bias.float()
                return F.linear(x.float(), self.weight.float(), bias).to(torch.bfloat16)  # weight widened per call
        return F.linear(x, self.weight, self.bias)


def pack(linears: list[Linear], probe_with: Linear, choice: str = "auto") -> str | None:
    """Give `linears` oneDNN's prepacked kernel for their dtype, checked on `probe_with` (one of
    them); returns its name, or None (products stay `F.linear`). With `choice` "auto", where it does
    not apply: another dtype or device, a torch or CPU without oneDNN's bfloat16 support
    (`bf16_kernel_problem`), float32 where oneDNN measures no faster (`packed_float32_wins`), or
    copies that would not fit. Any other `choice` (`--kernel`) is that kernel or exit 2 saying why
    it cannot run here; "torch" packs nothing.

    Why: torch's `F.linear` in bfloat16 on a CPU does not reach the bf16 dot-product units
    (AVX-512 BF16, AMX) for these shapes: measured on an Intel Xeon with avx512_bf16, a
    single-token pass took 78 ms in bfloat16 and 267 ms for a 4-token draft, against 49 and
    55 ms with packed weights and 73 and 112 ms in float32 (docs/performance.md). Prefills take
    torch's bfloat16 products from WIDE_ROWS_BF16 rows where those are faster than float32
    (always with AMX; measured elsewhere: `bf16_beats_float32`), float32 ones from WIDE_ROWS
    rows where they are not. float32 weights of F32_PACK_MIN elements or more are packed for
    the passes `float32_rows` says (every pass where the kernel is pinned). The packed copies
    sit beside the weights (those matrices, twice), which the output head and `state_dict` still read."""
    weight = probe_with.weight
    if choice == TORCH_KERNEL or (choice == "auto" and weight.device.type != "cpu"):
        return None
    chosen, name, rows, wide_bf16, rows_hint, tolerance = _plan(linears, weight, choice)
    if not chosen:
        return None
    size = sum(linear.weight.numel() * linear.weight.element_size() for linear in chosen)
    if size > _available_memory() / 2:  # the copies would crowd out the KV cache: torch's kernel
        if choice == "auto":
            return None
        raise _cannot(choice, f"its packed copies ({size / 2**20:.0f} MB) would take over half the free memory")
    for linear in chosen:
        linear.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), rows_hint)
        linear.packed_rows, linear.wide_bf16 = rows, wide_bf16
    probe_with = probe_with if any(linear is probe_with for linear in chosen) else chosen[0]
    width = probe_with.weight.shape[1]
    probe = torch.stack([torch.linspace(-1, 1, width), torch.linspace(1, -1, width)]).to(weight.dtype)
    with torch.inference_mode():  # two rows: a pass that both kernels take packed
        got, expected = probe_with(probe).float(), F.linear(probe, probe_with.weight, probe_with.bias).float()
    scale = expected.abs().max().item() if name == F32_KERNEL else 1.0  # bfloat16's bound stays absolute
    if not torch.allclose(got, expected, rtol=tolerance, atol=tolerance * scale):
        for linear in chosen:  # a kernel that computes otherwise: not used
            linear.packed = None
        if choice != "auto":
            raise _cannot(choice, "its products disagree with torch's on a probe")
        return None
    return name


_NOTHING = ([], None, (1, 0), False, 1, 0.0)  # `_plan`'s answer where "auto" packs nothing


def _plan(linears: list[Linear], weight: torch.Tensor, choice: str):
    """(the linears to pack, the kernel's name, the rows [first, end) of the passes that take it,
    prefills in bfloat16, oneDNN's rows hint, the probe's tolerance); no linears where "auto" finds
    nothing to pack. A pinned `choice` that cannot run on this device, dtype, torch or CPU is exit 2.
    A pinned float32 kernel takes every pass, whatever was measured (one kernel's arithmetic throughout)."""
    if weight.device.type != "cpu":
        raise _cannot(choice, f"it is a CPU kernel and the model is on {weight.device.type}")
    bf16_names = (BF16_KERNEL, PREFILL_BF16_KERNEL, AMX_KERNEL)
    if choice in bf16_names or (choice == "auto" and weight.dtype == torch.bfloat16):
        problem = bf16_kernel_problem()
        if choice == "auto" and problem is not None:
            return _NOTHING
        if weight.dtype != torch.bfloat16:
            raise _cannot(choice, f"it runs bfloat16 weights and these are {str(weight.dtype).removeprefix('torch.')}")
        if problem is not None:
            raise _cannot(choice, problem)
        if choice == AMX_KERNEL and not amx_tiles():
            raise _cannot(choice, "this CPU has no AMX tiles")
        if choice == "auto":
            amx = amx_tiles()
            wide = amx or bf16_beats_float32()
            choice = AMX_KERNEL if amx else PREFILL_BF16_KERNEL if wide else BF16_KERNEL
        wide_bf16 = choice in (AMX_KERNEL, PREFILL_BF16_KERNEL)
        return linears, choice, bf16_rows(wide_bf16), wide_bf16, 1, 2e-2  # bfloat16 keeps 8 bits of mantissa
    if weight.dtype != torch.float32:
        if choice == "auto":
            return _NOTHING
        raise _cannot(choice, f"it runs float32 weights and these are {str(weight.dtype).removeprefix('torch.')}")
    rows = float32_rows() if choice == "auto" else (1, float("inf"))
    if rows is None:
        return _NOTHING
    if (problem := onednn_problem()) is not None:
        raise _cannot(choice, problem)
    chosen = [linear for linear in linears if linear.weight.numel() >= F32_PACK_MIN]
    if not chosen and choice != "auto":
        raise _cannot(choice, f"no weight of this model has {F32_PACK_MIN:,} elements or more")
    return chosen, F32_KERNEL, rows, False, PACK_ROWS_HINT, 1e-4  # float32 sums differ only in their order


def bf16_rows(wide_bf16: bool) -> tuple[int, float]:
    """The rows [first, end) of the bfloat16 passes that take the packed kernel: below the bound where
    torch's bfloat16 products (`wide_bf16`) or float32 ones take over."""
    return (1, WIDE_ROWS_BF16 if wide_bf16 else WIDE_ROWS)


def float32_rows() -> tuple[int, float] | None:
    """The rows [first, end) of the float32 passes that take the packed kernel here: the measured
    ranges (one row, a few, wide) where it won, as one run (a single row and wide passes without the
    few between: the wide ones, where prefills spend their time); None where it won none."""
    single, few, wide = packed_float32_single_wins(), packed_float32_wins(), packed_float32_wide_wins()
    if few:
        return (1 if single else 2, float("inf") if wide else FEW_ROWS + 1)
    if wide:
        return (FEW_ROWS + 1, float("inf"))
    return (1, 2) if single else None


def _cannot(choice: str, why: str) -> UserError:
    return UserError(
        f"--kernel {choice} cannot run here: {why}",
        hint="use --kernel auto (what this machine measured fastest) or --kernel torch (torch's own products)",
    )
