"""The native forward's CPU kernels: oneDNN's prepacked matrix products (`pack_for_cpu`).

Where the CPU has bf16 dot-product units, a bfloat16 model loaded by the native forward packs its
weights; its logits must stay those of the same weights through `F.linear`, its constrained
outputs must validate, and the record must say which kernel ran. Where the CPU lacks them,
nothing is packed and the record says so (null). A float32 model packs its large products for
the passes (one row, a few, wide) where oneDNN measures faster than torch's own. A kernel that disagrees
with `F.linear` on its probe is not used.
"""

from __future__ import annotations

import json

import pytest
import torch

from sgcli.engine import cpu_attention, cpu_kernels
from sgcli.engine.loader import load_model
from sgcli.models.refs import resolve_model

PROBLEM = cpu_kernels.bf16_kernel_problem()  # None on a CPU with AVX-512 BF16 or AMX
# the packed kernels a CPU may get
KERNELS = (cpu_kernels.BF16_KERNEL, cpu_kernels.PREFILL_BF16_KERNEL, cpu_kernels.AMX_KERNEL)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, smol_tokenizer):
    """A random Llama checkpoint with SmolLM2's tokenizer beside it (a model folder like any other)."""
    import shutil
    from pathlib import Path

    from helpers import random_llama

    folder = tmp_path_factory.mktemp("bf16")
    random_llama(len(smol_tokenizer.vocab), "bf16", initializer_range=0.3).model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(Path(smol_tokenizer.vocab.source).parent / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def bf16(checkpoint):
    return load_model(resolve_model(str(checkpoint)), device="cpu", dtype="bfloat16", impl="native")


def _linears(lm):
    """The matrix products (the embedding's table is a lookup: never packed)."""
    return [m for m in lm.model.modules() if isinstance(m, cpu_kernels.Linear) and m is not lm.model.model.embed]


def test_bfloat16_packs_where_the_cpu_has_bf16_units_and_says_why_not_elsewhere(bf16):
    packed = [linear.packed is not None for linear in _linears(bf16)]
    assert bf16.model.model.embed.packed is None
    if PROBLEM is None:
        assert bf16.kernel in KERNELS and all(packed)
        assert (bf16.kernel == cpu_kernels.AMX_KERNEL) is cpu_kernels.amx_tiles()
        wide_bf16 = bf16.kernel != cpu_kernels.BF16_KERNEL
        assert all(linear.wide_bf16 is wide_bf16 for linear in _linears(bf16))
    else:
        assert bf16.kernel is None and not any(packed)
        assert "bfloat16" in PROBLEM or "oneDNN" in PROBLEM


def test_a_cpu_without_bf16_units_keeps_torchs_products(checkpoint, monkeypatch):
    for check in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        monkeypatch.setattr(torch.cpu, check, lambda: False)
    assert (
        cpu_kernels.bf16_kernel_problem() == "this CPU has no bfloat16 dot-product instructions (AVX-512 BF16 or AMX)"
    )
    lm = load_model(resolve_model(str(checkpoint)), device="cpu", dtype="bfloat16", impl="native")
    assert lm.kernel is None and not any(linear.packed is not None for linear in _linears(lm))


def test_no_packing_where_the_copies_would_not_fit_in_memory(checkpoint, monkeypatch):
    assert 0 < cpu_kernels._available_memory()  # this machine's MemAvailable (infinite where /proc cannot say)
    _fake_kernel(monkeypatch, 1.0)
    monkeypatch.setattr(cpu_kernels, "_available_memory", lambda: 1024.0)
    lm = load_model(resolve_model(str(checkpoint)), device="cpu", dtype="bfloat16", impl="native")
    assert lm.kernel is None and not any(linear.packed is not None for linear in _linears(lm))


def test_float32_is_not_packed_where_onednn_measures_no_faster(checkpoint, monkeypatch):
    _float32_verdicts(monkeypatch, False, False, False)
    lm = load_model(resolve_model(str(checkpoint)), device="cpu", dtype="float32", impl="native")
    assert lm.kernel is None and lm.model.pack_for_cpu() is None
    assert not any(linear.packed is not None for linear in _linears(lm))


def _float32_model(checkpoint, monkeypatch, smallest: int, single: bool = False, wide: bool = False):
    """The random checkpoint in float32, its products of `smallest` weights or more packed (oneDNN
    said to measure faster for a few rows, and for one row with `single`, wide passes with `wide`)."""
    _float32_verdicts(monkeypatch, single, True, wide)
    monkeypatch.setattr(cpu_kernels, "F32_PACK_MIN", smallest)
    return load_model(resolve_model(str(checkpoint)), device="cpu", dtype="float32", impl="native")


def _float32_verdicts(monkeypatch, single: bool, few: bool, wide: bool) -> None:
    monkeypatch.setattr(cpu_kernels, "packed_float32_single_wins", lambda: single)
    monkeypatch.setattr(cpu_kernels, "packed_float32_wins", lambda: few)
    monkeypatch.setattr(cpu_kernels, "packed_float32_wide_wins", lambda: wide)


@pytest.mark.parametrize(("single", "wide"), [(False, False), (True, True)], ids=["few-rows-only", "every-width"])
def test_float32_packs_its_large_products_for_the_passes_measured_faster(checkpoint, monkeypatch, single, wide):
    import torch.nn.functional as F

    config = json.loads((checkpoint / "config.json").read_text())
    _fake_kernel(monkeypatch, 1.0)
    lm = _float32_model(checkpoint, monkeypatch, config["vocab_size"] * config["hidden_size"], single, wide)
    assert lm.kernel == cpu_kernels.F32_KERNEL
    packed = [linear for linear in _linears(lm) if linear.packed is not None]
    assert packed == [lm.model.lm_head] and lm.model.model.embed.packed is None
    calls = []
    fake = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda x, *rest: calls.append(x.shape) or fake(x, *rest))
    few = cpu_kernels.FEW_ROWS
    ids = (torch.arange(3 * few).view(1, -1) * 37) % 5000
    with torch.inference_mode():
        for rows, packed_kernel in [(1, single), (2, True), (few, True), (few + 1, wide), (3 * few, wide)]:
            calls.clear()
            logits = lm.model(input_ids=ids[:, :rows]).logits
            assert len(calls) == packed_kernel, rows  # the head's one product, packed or F.linear
            hidden = lm.model.model(input_ids=ids[:, :rows]).last_hidden_state
            assert torch.allclose(logits, F.linear(hidden, lm.model.lm_head.weight), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("single", "few", "wide", "rows"),
    [
        (False, False, False, None),
        (False, True, False, (2, cpu_kernels.FEW_ROWS + 1)),
        (True, True, False, (1, cpu_kernels.FEW_ROWS + 1)),
        (True, True, True, (1, float("inf"))),
        (False, False, True, (cpu_kernels.FEW_ROWS + 1, float("inf"))),
        (True, False, False, (1, 2)),
        (True, False, True, (cpu_kernels.FEW_ROWS + 1, float("inf"))),  # not contiguous: the prefills' range
    ],
)
def test_float32_rows_are_the_measured_ranges_as_one_run(monkeypatch, single, few, wide, rows):
    _float32_verdicts(monkeypatch, single, few, wide)
    assert cpu_kernels.float32_rows() == rows


def test_a_pinned_float32_kernel_takes_every_pass_whatever_was_measured(checkpoint, monkeypatch):
    _float32_verdicts(monkeypatch, False, False, False)
    monkeypatch.setattr(cpu_kernels, "F32_PACK_MIN", 0)
    lm = load_model(resolve_model(str(checkpoint)), device="cpu", dtype="float32", impl="native", kernel="onednn-f32")
    assert lm.kernel == cpu_kernels.F32_KERNEL
    assert all(linear.packed_rows == (1, float("inf")) for linear in _linears(lm))


def test_float32_packed_logits_are_the_same_weights_through_f_linear(checkpoint, monkeypatch):
    assert cpu_kernels.onednn_problem() is None  # the pinned torch 2.13.0 CPU build has oneDNN
    lm = _float32_model(checkpoint, monkeypatch, 0)  # every product packed, oneDNN's real kernel
    assert lm.kernel == cpu_kernels.F32_KERNEL and all(linear.packed is not None for linear in _linears(lm))
    ids = torch.tensor([[5, 17, 900, 42, 7, 7, 3000, 11]])
    with torch.inference_mode():
        got = lm.model(input_ids=ids).logits
        for linear in _linears(lm):
            linear.packed = None
        want = lm.model(input_ids=ids).logits
    assert torch.isfinite(got).all()
    # float32 sums in another order: equal but for the last bits
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-4 * want.abs().max().item()), (got - want).abs().max()


@pytest.mark.parametrize("rows", [1, 4, 64], ids=["single", "few", "wide"])
@pytest.mark.parametrize("slow", ["torch", "onednn"])
def test_the_float32_kernel_is_the_one_measured_faster(monkeypatch, slow, rows):
    """`packed_float32_wins` (and its single-row and wide twins) times both products of its rows:
    made 30x dearer, either one loses."""
    import torch.nn.functional as F

    linear = F.linear

    def product(kernel):
        def run(x, w, *rest):
            for _ in range(30 if kernel == slow else 1):
                out = linear(x, w)
            return out

        return run

    monkeypatch.setattr(cpu_kernels, "onednn_problem", lambda: None)
    monkeypatch.setattr(cpu_kernels.F, "linear", product("torch"))
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", lambda w, rows: w.clone())
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", product("onednn"))
    measured = cpu_kernels.measure_packed_float32(rows=rows, inputs=256, outputs=512)  # not the remembered answer
    assert measured.wins is (slow == "torch")
    assert (measured.candidate_s > measured.baseline_s) is (slow == "onednn")


def test_packed_logits_are_the_same_weights_through_f_linear(bf16):
    ids = torch.tensor([[5, 17, 900, 42, 7, 7, 3000, 11]])
    with torch.inference_mode():
        got = bf16.model(input_ids=ids).logits.float()
        kept = [linear.packed for linear in _linears(bf16)]
        for linear in _linears(bf16):
            linear.packed = None
        try:
            want = bf16.model(input_ids=ids).logits.float()
        finally:
            for linear, packed in zip(_linears(bf16), kept):
                linear.packed = packed
    assert got.shape == want.shape and torch.isfinite(got).all()
    # bfloat16 keeps 8 bits of mantissa: the two kernels round their sums differently, not more
    assert torch.allclose(got, want, rtol=0.05, atol=0.05 * want.abs().max().item()), (got - want).abs().max()


def _fake_kernel(monkeypatch, scale: float, amx: bool = False, bf16_faster: bool = False):
    """oneDNN's two ops replaced by torch arithmetic scaled by `scale` (1: a kernel that agrees with
    `F.linear`), on a CPU said to have bf16 units (and AMX tiles, with `amx`; where torch's
    bfloat16 products measure faster than float32 ones, with `bf16_faster`): the probe's verdict
    and the wide passes' kernel are tested on any machine."""
    import torch.nn.functional as F

    monkeypatch.setattr(cpu_kernels, "bf16_kernel_problem", lambda: None)
    monkeypatch.setattr(cpu_kernels, "amx_tiles", lambda: amx)
    monkeypatch.setattr(cpu_kernels, "bf16_beats_float32", lambda: bf16_faster)
    _float32_verdicts(monkeypatch, False, True, False)
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", lambda w, rows: w.clone())
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda x, w, *rest: F.linear(x, w) * scale)


@pytest.mark.parametrize("scale", [1.0, 2.0], ids=["agrees", "disagrees"])
def test_a_kernel_is_used_only_where_it_agrees_with_f_linear_on_its_probe(checkpoint, monkeypatch, scale):
    _fake_kernel(monkeypatch, scale)
    lm = load_model(resolve_model(str(checkpoint)), device="cpu", dtype="bfloat16", impl="native")
    packed = [linear.packed is not None for linear in _linears(lm)]
    if scale == 1.0:
        assert lm.kernel == cpu_kernels.BF16_KERNEL and all(packed)  # bf16 measured slower: prefills in float32
    else:
        assert lm.kernel is None and not any(packed)


@pytest.mark.parametrize("slow", [torch.float32, torch.bfloat16])
def test_the_wide_kernel_is_the_one_measured_faster(monkeypatch, slow):
    """`bf16_beats_float32` times both products of a wide pass: made 30x dearer, either one loses."""
    import torch.nn.functional as F

    linear = F.linear

    def product(x, w, *rest):
        for _ in range(30 if x.dtype == slow else 1):
            out = linear(x, w, *rest)
        return out

    monkeypatch.setattr(cpu_kernels.F, "linear", product)
    measured = cpu_kernels.measure_bf16_prefill(rows=64, inputs=256, outputs=512)  # not the remembered answer
    assert measured.wins is (slow == torch.float32)


@pytest.mark.parametrize(
    ("amx", "bf16_faster", "kernel"),
    [
        (False, False, cpu_kernels.BF16_KERNEL),
        (False, True, cpu_kernels.PREFILL_BF16_KERNEL),
        (True, False, cpu_kernels.AMX_KERNEL),
    ],
    ids=["float32-faster", "bf16-faster", "amx"],
)
def test_wide_passes_take_the_cpus_faster_kernel_and_keep_the_logits(checkpoint, monkeypatch, amx, bf16_faster, kernel):
    """A prefill of WIDE_ROWS tokens or more runs float32 products where those measure faster, one
    of WIDE_ROWS_BF16 or more torch's bfloat16 ones where those do (always with AMX: not measured
    there); narrower passes the packed kernel."""
    _fake_kernel(monkeypatch, 1.0, amx, bf16_faster)
    lm = load_model(resolve_model(str(checkpoint)), device="cpu", dtype="bfloat16", impl="native")
    assert lm.kernel == kernel
    wide_bf16 = amx or bf16_faster
    calls, products = [], []
    fake = torch.ops.mkldnn._linear_pointwise
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda x, *rest: calls.append(x.shape) or fake(x, *rest))
    f_linear = cpu_kernels.F.linear
    monkeypatch.setattr(cpu_kernels.F, "linear", lambda x, w, *rest: products.append(x.dtype) or f_linear(x, w, *rest))
    bound = cpu_kernels.WIDE_ROWS_BF16 if wide_bf16 else cpu_kernels.WIDE_ROWS
    ids = (torch.arange(2 * bound).view(2, -1) * 37) % 5000
    with torch.inference_mode():
        if wide_bf16:  # below its bound every product is the packed kernel's (the fake's own F.linear)
            lm.model(input_ids=ids[:, : cpu_kernels.WIDE_ROWS])
            assert len(calls) == len(products) == 4 * len(lm.model.model.layers) + 1
            calls.clear()
            products.clear()
        wide = lm.model(input_ids=ids).logits.float()
        assert calls == []
        assert products and set(products) == {torch.bfloat16 if wide_bf16 else torch.float32}
        lm.model(input_ids=ids[:, :4])
        assert len(calls) == 4 * len(lm.model.model.layers) + 1  # every product of the narrow pass, and the head
        for linear in _linears(lm):
            linear.packed = None
        want = lm.model(input_ids=ids).logits.float()  # torch's bfloat16 products throughout
    assert wide.shape == want.shape and torch.isfinite(wide).all()
    assert torch.allclose(wide, want, rtol=0.05, atol=0.05 * want.abs().max().item()), (wide - want).abs().max()


def test_packed_runs_validate_and_the_record_names_the_kernel(run_cli, checkpoint, bf16, tmp_path):
    out = tmp_path / "out.jsonl"
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ("hi", "Capital of France?", "x y z")))
    args = ["generate", "--model", checkpoint, "--dtype", "bfloat16", "--regex", "[a-z]{3}-[0-9]{2,4}", "-n", "24"]
    result = run_cli(
        *args, "--temperature", "1", "--seed", "5", "--batch-size", "2", "--json", "-o", out, "--input", lines
    )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3
    for record in records:
        assert record["dtype"] == "bfloat16" and record["kernel"] == (bf16.kernel if PROBLEM is None else None)
        assert record["finish_reason"] == "stop" and record["valid"] is True, record


# --- --kernel: pinned kernels and probes remembered per machine ---


def test_two_pinned_float32_kernels_give_the_same_greedy_output_and_say_which_ran(checkpoint, smol_tokenizer):
    """The same request under `--kernel torch` and `--kernel onednn-f32`: float32 sums in another
    order, so the logits agree to float32's last bits and the greedy tokens are the same; the
    loaded model names the kernel that ran (None: torch's own)."""
    assert cpu_kernels.onednn_problem() is None  # the pinned torch 2.13.0 CPU build has oneDNN
    ids = torch.tensor([[5, 17, 900, 42, 7, 7, 3000, 11]])
    runs = {}
    for kernel in ("torch", "onednn-f32"):
        lm = load_model(resolve_model(str(checkpoint)), device="cpu", dtype="float32", impl="native", kernel=kernel)
        assert lm.kernel == (None if kernel == "torch" else cpu_kernels.F32_KERNEL)
        assert any(linear.packed is not None for linear in _linears(lm)) is (kernel != "torch")
        with torch.inference_mode():
            tokens = ids
            for _ in range(8):  # passes of 2 to 8 rows after the first: the packed kernel's own range
                logits = lm.model(input_ids=tokens[:, -4:]).logits
                tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        runs[kernel] = (logits, tokens)
    (a_logits, a_tokens), (b_logits, b_tokens) = runs.values()
    assert torch.equal(a_tokens, b_tokens)
    assert torch.allclose(a_logits, b_logits, rtol=1e-4, atol=1e-4 * a_logits.abs().max().item())


@pytest.mark.parametrize(
    ("kernel", "dtype", "message"),
    [
        ("onednn-bf16", "float32", "it runs bfloat16 weights and these are float32"),
        ("onednn-f32", "bfloat16", "it runs float32 weights and these are bfloat16"),
    ],
)
def test_a_pinned_kernel_that_cannot_run_is_exit_2_saying_why(checkpoint, kernel, dtype, message):
    from sgcli.errors import UserError

    with pytest.raises(UserError) as exc:
        load_model(resolve_model(str(checkpoint)), device="cpu", dtype=dtype, impl="native", kernel=kernel)
    assert exc.value.message == f"--kernel {kernel} cannot run here: {message}" and "--kernel auto" in exc.value.hint


def test_the_cli_refuses_an_unknown_kernel_before_loading(run_cli):
    result = run_cli("generate", "--kernel", "onednn", "--regex", "a", "hi")
    assert result.exit_code == 2 and "onednn-f32" in result.output and "Traceback" not in result.output


def test_a_probe_is_measured_once_per_machine_and_remembered(tmp_path, monkeypatch):
    """The first process on a machine measures; later ones read the verdict (so a near tie cannot
    flip with the load between runs); a damaged file is said and measured again."""
    from sgcli.engine import kernel_probes
    from sgcli.engine.kernel_probes import Measured

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path))
    measured = []

    def measure():
        measured.append(1)
        return Measured(True, 1.0, 2.0)

    probe = cpu_kernels.machine_probe("test-probe")(measure)
    assert probe() is True and measured == [1]
    probe.cache_clear()  # a new process: the answer comes from the file
    assert probe() is True and measured == [1]
    path = tmp_path / "kernels" / kernel_probes.FILE
    entry = json.loads(path.read_text())["machines"]
    (machine,) = entry
    assert "thread" in machine and entry[machine]["test-probe"]["candidate_s"] == 1.0
    path.write_text("{not json")
    probe.cache_clear()
    with pytest.warns(UserWarning, match=r"kernel probe file .*cpu-kernels.json is unreadable"):
        assert probe() is True
    assert measured == [1, 1] and json.loads(path.read_text())["format"] == kernel_probes.FORMAT


def test_machines_of_one_model_name_but_another_cpu_generation_keep_their_own_verdicts():
    """Virtual machines name Zen 1 to Zen 5 alike ("AMD EPYC"), and their kernels' verdicts differ:
    the machine a verdict is remembered for includes the first processor's family and model."""
    from sgcli.engine.kernel_probes import describe_cpu

    def cpuinfo(family: int, model: int) -> str:
        block = f"processor\t: {{}}\nvendor_id\t: AuthenticAMD\ncpu family\t: {family}\nmodel\t\t: {model}\n"
        block += "model name\t: AMD EPYC\nflags\t\t: fpu avx2\n\n"
        return block.format(0) + block.format(1)

    zen3, zen5 = describe_cpu(cpuinfo(25, 1)), describe_cpu(cpuinfo(26, 2))
    assert zen3 == "AMD EPYC (family 25, model 1)" and zen5 == "AMD EPYC (family 26, model 2)"
    assert describe_cpu("model name\t: Some CPU\n") == "Some CPU"  # no numbers given: the name alone
    assert describe_cpu("processor\t: 0\n") is None


def test_attention_on_cuda_leaves_cudnn_out():
    """On an H200 cuDNN's attention failed the ragged batch path's sliced inputs (docs/notes/gpu.md); CUDA
    SDPA runs under a context that enables every other backend. Checked here by its flags (no GPU)."""
    with cpu_attention._without_cudnn_attention():
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
        assert torch.backends.cuda.math_sdp_enabled()
