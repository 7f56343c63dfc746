"""CPU cost of one forward pass of the default model (native forward) by its shape, per kernel:
float32, bfloat16 through torch's `F.linear`, and bfloat16 packed for oneDNN with prefills
widened to float32 or kept in bfloat16 (what `cpu_kernels.pack` picks where float32 or bfloat16
runs wide products faster).

Decode shapes are `rows x width` new tokens over a 60-token cache (a batch step, a draft);
prefill shapes have no cache. What a draft or a batch row costs against a single-token pass is
what sets `DRAFT_POSITIONS` and `WIDE_ROWS`; this prints it for the CPU it runs on.

`--products` times one matrix product alone instead (SmolLM2's gate/up shape, 576 -> 3072) by
rows, per kernel: where the packed kernel stops being the fastest is `WIDE_ROWS`.

    python benchmarks/pass_width.py [--rounds 3] [--passes 4] [--products]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import ROOT  # noqa: F401  (puts the repo on sys.path)

DECODE = [(1, 1), (1, 2), (1, 4), (1, 8), (1, 16), (4, 1), (8, 1), (16, 1), (16, 2), (16, 4), (32, 1), (32, 2)]
PREFILL = [(1, 128), (1, 512), (16, 70)]
CACHED = 60


def configs(lms):
    """(label, model, how its Linear layers are set) for each kernel measured."""
    from sgcli.engine import cpu_kernels

    bf16 = lms["bfloat16"]
    packed = bf16.kernel is not None
    out = [("float32", lms["float32"].model, None), ("bfloat16, torch", bf16.model, (False, False))]
    if packed:
        out += [
            (f"bfloat16 packed, float32 from {cpu_kernels.WIDE_ROWS} rows", bf16.model, (True, False)),
            (f"bfloat16 packed, torch's bfloat16 from {cpu_kernels.WIDE_ROWS_BF16} rows", bf16.model, (True, True)),
        ]
    return out, {linear: linear.packed for linear in bf16.model.modules() if isinstance(linear, cpu_kernels.Linear)}


def set_kernel(packs: dict, setting) -> None:
    """(packed, wide_bf16): packed or not, and whether wide passes take torch's bfloat16 products from
    WIDE_ROWS_BF16 rows or float32 ones from WIDE_ROWS: what `cpu_kernels.pack` chooses."""
    if setting is None:
        return
    from sgcli.engine import cpu_kernels

    packed, wide_bf16 = setting
    for linear, kept in packs.items():
        linear.packed = kept if packed else None
        linear.packed_rows, linear.wide_bf16 = cpu_kernels.bf16_rows(wide_bf16), wide_bf16


def pass_ms(model, rows: int, width: int, cached: int, passes: int) -> float:
    """CPU ms of one pass of `rows x width` new tokens after `cached` cached ones (median)."""
    import torch

    times = []
    with torch.inference_mode():
        ids = (torch.arange(rows * (cached + width)).view(rows, -1) * 37 + 100) % 40000
        for _ in range(passes):
            cache = None
            if cached:
                cache = model(input_ids=ids[:, :cached], logits_to_keep=1).past_key_values
            t = time.process_time()
            model(input_ids=ids[:, cached:], past_key_values=cache, logits_to_keep=1)
            times.append((time.process_time() - t) * 1000)
    return statistics.median(times)


def products(rounds: int) -> None:
    """CPU ms of one product [rows, 576] x [576, 3072] by rows: float32 through torch (MKL) and
    packed for oneDNN, torch's bfloat16 and the packed bfloat16 kernel (where this CPU has one)."""
    import torch
    import torch.nn.functional as F

    from sgcli.engine import cpu_kernels

    weight = torch.randn(3072, 576)
    half = weight.bfloat16()
    packed = torch.ops.mkldnn._reorder_linear_weight(half, 1) if cpu_kernels.bf16_kernel_problem() is None else None
    packed_f32 = None if cpu_kernels.onednn_problem() else torch.ops.mkldnn._reorder_linear_weight(weight, 4)
    kernels = {
        "float32": lambda x: F.linear(x, weight),
        "bfloat16, torch": lambda x: F.linear(x, half),
    }
    if packed_f32 is not None:
        kernels["float32 packed"] = lambda x: torch.ops.mkldnn._linear_pointwise(
            x, packed_f32, None, "none", [None], ""
        )
    if packed is not None:
        kernels["bfloat16 packed"] = lambda x: torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [None], "")
    print(f"CPU ms per product, median of {rounds} rounds (GFLOP/s)")
    print("| rows | " + " | ".join(kernels) + " |")
    print("|---|" + "---|" * len(kernels))
    for rows in (1, 4, 16, 64, 128, 256, 512, 1024):
        x = torch.randn(rows, 576)
        inputs = {name: x.bfloat16() if "bfloat16" in name else x for name in kernels}
        reps = max(5, 2000 // rows)
        cells = []
        for name, kernel in kernels.items():
            times = []
            for _ in range(rounds):
                kernel(inputs[name])
                t = time.process_time()
                for _ in range(reps):
                    kernel(inputs[name])
                times.append((time.process_time() - t) / reps * 1000)
            ms = statistics.median(times)
            cells.append(f"{ms:.3f} ({2 * rows * 576 * 3072 / ms / 1e6:.0f})")
        print(f"| {rows} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--products", action="store_true", help="time one matrix product alone, by rows")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    if args.products:
        products(args.rounds)
        return
    from common import load_default

    from sgcli.engine import cpu_kernels

    lms = {d: load_default(args.threads, dtype=d, impl="native")[1] for d in ("float32", "bfloat16")}
    measured, packs = configs(lms)
    print(
        f"# torch {torch.__version__}, {torch.get_num_threads()} thread(s); AMX {cpu_kernels.amx_tiles()}; "
        f"bf16 kernel problem: {cpu_kernels.bf16_kernel_problem()}; load_model picked {lms['bfloat16'].kernel}"
    )
    shapes = [(r, w, CACHED) for r, w in DECODE] + [(r, w, 0) for r, w in PREFILL]
    results: dict[tuple[str, tuple], list[float]] = {}
    for _ in range(args.rounds):  # interleaved: each round measures every kernel at every shape
        for label, model, setting in measured:
            set_kernel(packs, setting)
            for shape in shapes:
                results.setdefault((label, shape), []).append(pass_ms(model, *shape, passes=args.passes))
    set_kernel(packs, (True, lms["bfloat16"].kernel != cpu_kernels.BF16_KERNEL))  # as loaded
    labels = [label for label, _, _ in measured]
    print(f"CPU ms per pass, median of {args.rounds} rounds x {args.passes} passes (x: against 1 x 1 decode)")
    print("| rows x tokens | cache | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for shape in shapes:
        cells = []
        for label in labels:
            ms = statistics.median(results[(label, shape)])
            base = statistics.median(results[(label, (1, 1, CACHED))])
            cells.append(f"{ms:.1f} ({ms / base:.2f}x)")
        print(f"| {shape[0]} x {shape[1]} | {shape[2]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
