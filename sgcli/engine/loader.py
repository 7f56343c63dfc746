"""Loading causal LMs: hub ids, local folders, and GGUF files converted once and cached
(`gguf_convert`), on the forward `impl_choice.choose_impl` picks (sgcli's native one or
transformers'), on which device, dtype, threads and CPU kernel.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sgcli.cache import conversions
from sgcli.engine import checkpoint
from sgcli.engine.flags import KERNELS, TORCH_KERNEL, check_device
from sgcli.engine.gguf_convert import Progress, cached_conversion, convert_gguf, weights_problem
from sgcli.engine.impl_choice import choose_impl, native_folder, needs_remote_code
from sgcli.errors import UserError, did_you_mean
from sgcli.models.hub import hub_options, offline, offline_error
from sgcli.models.refs import ModelRef

if TYPE_CHECKING:
    import torch

    from sgcli.engine.gguf_pending import PendingState
    from sgcli.engine.runtime import Runtime


# Threads: without `--threads`, what the machine offers now (sgcli.engine.threads: the usable
# physical cores less those other work keeps busy, at most 8). On a busy 2-core machine one thread
# was 3.2x faster than two in float32 (docs/performance.md); on an idle one two were 1.2-1.6x faster.
# dtype: bf16 was no faster on a CPU without bf16 units; on one with them the native forward's packed
# bf16 kernel is (`llama.pack_for_cpu`), but its outputs differ from float32's, so `--dtype auto`
# keeps float32 on every CPU (bf16 on CUDA) and bf16 is asked for.


IMPLS = ("auto", "native", "transformers")


@dataclass(eq=False)
class LoadedModel:
    runtime: Runtime  # whose forward pass runs the model, and what it supports (sgcli.engine.runtime)
    ref: ModelRef
    device: str
    dtype: str
    logits_width: int
    load_s: float
    threads: int | None = None  # torch's CPU threads while this model runs
    kernel: str | None = None  # the CPU matrix-product kernel the native forward packed its weights for
    impl_reason: str | None = None  # why auto ran transformers (`choose_impl`); None where it was not auto's call

    @property
    def impl(self) -> str:
        """native (sgcli.engine.llama) or transformers: the record's model_impl."""
        return self.runtime.impl

    @property
    def model(self) -> torch.nn.Module:
        """The torch model itself (tests and benchmarks call it; the engine goes through `runtime`)."""
        return self.runtime.module


def pick_device(device: str) -> str:
    """auto: CUDA where torch sees it, else the CPU (mps only when asked for: not every op runs there)."""
    import torch

    check_device(device)
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def pick_dtype(dtype: str, device: str, *, from_checkpoint: bool = False):
    """The torch dtype for `--dtype`. auto: float32 on the CPU (see the note on dtype above); on a GPU
    the checkpoint's own (the string "auto", which from_pretrained reads from the config's dtype) where
    the weights come as they were trained (`from_checkpoint`), else bfloat16 (a dequantized GGUF)."""
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype == "auto":
        if device == "cpu":
            return torch.float32
        return "auto" if from_checkpoint else torch.bfloat16
    if dtype not in table:
        raise UserError(f"unknown dtype '{dtype}'", hint="use auto, float32, bfloat16 or float16")
    return table[dtype]


def load_model(
    ref: ModelRef,
    *,
    device: str = "auto",
    dtype: str = "auto",
    progress: Progress | None = None,
    threads: int | None = None,
    device_map: str | dict | None = None,
    impl: str = "auto",
    kernel: str = "auto",
    pending: PendingState | None = None,
) -> LoadedModel:
    """Load a causal LM. `threads` sets torch's CPU threads; the default is what the machine offers now
    (`sgcli.engine.threads.default_cpu_threads`).
    `device_map` (accelerate's placement, "auto" or {module: device}) replaces `device`. `impl`:
    the native forward (`sgcli.engine.llama`) where the model fits it, else transformers (auto), or
    either one only (a model the native forward cannot run is then exit 2, saying why). `kernel`
    (--kernel): the CPU matrix-product kernel, measured per machine (auto) or pinned. `pending`:
    the .gguf's weights as `start_weights` began them (taken, or stopped, here)."""
    try:
        return _load_model(ref, device, dtype, progress, threads, device_map, impl, kernel, pending)
    finally:
        if pending is not None:
            pending.cancel()  # a no-op once taken; else (an error, a fresh conversion) its child stops


def start_weights(ref: ModelRef, device_map: str | dict | None = None) -> PendingState | None:
    """The weights of a .gguf whose conversion is cached, dequantized from now on in a forked child on
    another core (`gguf_pending.PendingState`) while the caller loads the tokenizer, compiles the
    grammar and imports torch; for `load_model(pending=...)`. None where nothing is started: another
    kind of model, no conversion yet, --device-map (transformers then reads the .gguf itself)."""
    if ref.kind != "gguf" or device_map is not None:
        return None
    from sgcli.engine import gguf_recipe
    from sgcli.engine.gguf_pending import PendingState

    folder = cached_conversion(ref.path)
    if folder is None or not gguf_recipe.has_recipe(folder):
        return None
    try:
        return PendingState(folder, ref.path)
    except Exception:  # noqa: BLE001 - a damaged recipe, no memory, no fork: the load meets it and says so
        return None


def _load_model(ref, device, dtype, progress, threads, device_map, impl, kernel, pending) -> LoadedModel:
    import torch

    if threads is not None and threads < 1:
        raise UserError("--threads must be at least 1")
    if kernel not in KERNELS:
        raise UserError(f"unknown kernel '{kernel}'" + did_you_mean(kernel, KERNELS), hint="use " + ", ".join(KERNELS))
    if impl not in IMPLS:
        raise UserError(f"unknown model implementation '{impl}'", hint="use " + ", ".join(IMPLS))
    from sgcli.engine import threads as cpu_threads

    governor = None
    if threads is None:  # the machine's offer now, followed through the run; --threads pins it
        threads, governor = cpu_threads.default_threads(torch.set_num_threads)
    torch.set_num_threads(threads)
    t = time.perf_counter()
    dev = pick_device(device)
    gpu = dev != "cpu" or (device_map is not None and torch.cuda.is_available())
    torch_dtype = pick_dtype(dtype, "cuda" if gpu else "cpu", from_checkpoint=True)
    placement = {"device_map": device_map} if device_map is not None else {}
    check_weights(ref)  # a damaged file is exit 2 on either forward, before either reads it
    native, impl_reason = choose_impl(ref, impl, placement, dev, progress)
    if ref.kind == "gguf":
        if torch_dtype == "auto":
            torch_dtype = torch.bfloat16  # a dequantized GGUF has no trained dtype of its own
        runtime = _load_converted(ref.path, torch_dtype, progress, placement, native, pending)
    elif native:
        folder = native_folder(ref, progress)
        runtime = _load_native(folder, _native_dtype(folder, torch_dtype))
    else:
        runtime = _transformers_runtime(_from_pretrained(ref, torch_dtype, placement))
    model = runtime.module
    if device_map is None:
        model.to(dev)
    else:
        dev = str(next(model.parameters()).device)
    model.eval()
    dtype_name = str(model.dtype).removeprefix("torch.")
    if dev != "cpu" and kernel not in ("auto", TORCH_KERNEL):
        raise UserError(f"--kernel {kernel} is a CPU kernel and the model runs on {dev}", hint="use --kernel auto")
    kernel = runtime.pack_for_cpu(kernel) if dev == "cpu" else None
    elapsed = time.perf_counter() - t
    width = runtime.logits_width()
    cpu_threads.govern(governor if dev == "cpu" and not gpu else None)
    return LoadedModel(runtime, ref, dev, dtype_name, width, elapsed, torch.get_num_threads(), kernel, impl_reason)


def _transformers_runtime(model) -> Runtime:
    from sgcli.engine.runtime import TransformersRuntime

    return TransformersRuntime(model)


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def check_weights(ref: ModelRef) -> None:
    """A model folder's safetensors files all there and whole (`checkpoint.check_weights`), or exit 2
    naming the file: cheap, so before anything slow."""
    if ref.kind == "dir":
        checkpoint.check_weights(ref.path)


def _native_dtype(folder: Path, torch_dtype):
    """`--dtype auto` on a GPU ("auto": the checkpoint's own, as transformers reads it)."""
    import torch

    if torch_dtype != "auto":
        return torch_dtype
    config = checkpoint.read_config(folder / "config.json")
    name = config.get("dtype") or config.get("torch_dtype")
    return {"float16": torch.float16, "float32": torch.float32}.get(name, torch.bfloat16)


def _load_native(folder: Path, torch_dtype) -> Runtime:
    from sgcli.engine import llama
    from sgcli.engine.runtime import NativeRuntime

    try:
        return NativeRuntime(llama.load(folder, checkpoint.read_config(folder / "config.json"), torch_dtype))
    except ValueError as exc:
        raise UserError(
            f"cannot load the weights in {folder}: {exc}",
            hint="check the folder's safetensors files against its config.json, or use --model-impl transformers",
        ) from None


def _load_converted(
    gguf: Path,
    torch_dtype,
    progress: Progress | None,
    placement: dict | None = None,
    native: bool = True,
    pending: PendingState | None = None,
) -> Runtime:
    """The cached conversion of `gguf` (its recipe replayed on `gguf`), loaded and checked; a damaged one
    is rebuilt once, with a notice. `native`: by sgcli's forward, else by transformers."""
    from sgcli.engine import gguf_recipe, llama
    from sgcli.engine.runtime import NativeRuntime

    for attempt in (1, 2):
        folder = convert_gguf(gguf, progress)
        try:
            placed = bool(placement) and not native  # --device-map: transformers reads and places the .gguf
            if placed:
                weights = None
            elif pending is not None and attempt == 1 and pending.folder == folder:
                weights = pending.result()  # dequantized in a child meanwhile (`start_weights`)
            else:
                weights = gguf_recipe.load_state(folder, gguf)
            if native:
                config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
                runtime = NativeRuntime(llama.load(folder, config, torch_dtype, weights))
            else:
                runtime = _transformers_runtime(_transformers_converted(folder, torch_dtype, placement, weights, gguf))
            if pending is not None and pending.checked is not None and attempt == 1:
                found = pending.problem or weights_problem(runtime.module, pending.holds)  # the rest
            else:
                found = weights_problem(runtime.module)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the damaged files make the loader raise
            found = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if found is None:
            return runtime
        if attempt == 1:
            conversions.discard(folder, f"the cached conversion in {folder} cannot be used ({found}): converting again")
    raise UserError(
        f"the model converted from {gguf} is unusable even when freshly converted: {found}",
        hint="the .gguf file itself may be damaged: download it again",
    )


def _transformers_converted(folder: Path, torch_dtype, placement: dict | None, weights: dict | None, gguf: Path):
    """transformers' model given the recipe's `weights`; with --device-map, transformers places it and
    reads the .gguf itself (it takes no weights with a folder): ~20 s of dequantizing each time."""
    from transformers import AutoModelForCausalLM

    _quiet_transformers()
    direct = None if placement else load_state_direct(folder, torch_dtype, weights)
    options = {"gguf_file": gguf.name, "dtype": torch_dtype, **(placement or {})}
    return direct or AutoModelForCausalLM.from_pretrained(str(gguf.parent), **options).eval()


def _no_init_weights():
    """transformers' context that skips weight initialisation: `transformers.initialization` in
    5.x, `modeling_utils` in 4.x (the range pyproject allows); None where neither has it."""
    import importlib

    for module in ("transformers.initialization", "transformers.modeling_utils"):
        try:
            return importlib.import_module(module).no_init_weights
        except (ImportError, AttributeError):
            continue
    return None


def load_state_direct(folder: Path, torch_dtype, weights: dict | None = None):
    """A converted folder (config.json, and one model.safetensors or the `weights` its recipe made)
    loaded without `from_pretrained`: built from its config with weight initialisation off, the tensors
    assigned (~0.1 s instead of ~0.8 s for the default model). None, so the caller uses `from_pretrained`,
    unless every parameter came from the weights or from its declared tied twin."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    no_init_weights = _no_init_weights()
    file = folder / "model.safetensors"
    if no_init_weights is None:  # a transformers release without it: from_pretrained does the work
        return None
    if weights is None and (not file.is_file() or any(folder.glob("*.safetensors.index.json"))):
        return None
    config = AutoConfig.from_pretrained(str(folder))
    with no_init_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    built = model.state_dict()  # each tensor takes the dtype the model was built with, as from_pretrained casts
    given = weights if weights is not None else load_file(str(file))
    state = {k: v.to(built[k].dtype) if k in built else v for k, v in given.items()}
    tied = model.all_tied_weights_keys or {}
    if weights is not None:  # a recipe names both twins; the file, as saved, one
        state = {k: v for k, v in state.items() if tied.get(k) not in state}
    result = model.load_state_dict(state, strict=False, assign=True)
    missing = set(result.missing_keys)
    if result.unexpected_keys or missing - set(tied) - set(tied.values()):
        return None
    model.tie_weights(missing_keys=missing, recompute_mapping=False)  # ties whichever twin the file holds
    if missing and any(p.device.type == "meta" for p in model.parameters()):
        return None
    if (folder / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(str(folder))
    return model.eval()


def _from_pretrained(ref: ModelRef, torch_dtype, placement: dict | None = None):
    from transformers import AutoModelForCausalLM

    _quiet_transformers()
    if ref.kind == "dir" and not ref.trust_remote_code and needs_remote_code(ref.path / "config.json"):
        raise remote_code_error(ref.display)  # before transformers asks on stdin or imports anything
    options = {**(hub_options() if ref.kind == "hub" else {}), **(placement or {})}
    if ref.revision is not None:
        options["revision"] = ref.revision
    if ref.trust_remote_code:
        options["trust_remote_code"] = True
    try:
        return AutoModelForCausalLM.from_pretrained(ref.location, dtype=torch_dtype, **options)
    except OSError as exc:
        if ref.kind == "hub" and offline():
            raise offline_error(ref.location, "model weights") from None
        raise UserError(
            f"cannot load model '{ref.display}': {str(exc).splitlines()[0]}",
            hint="pass a local folder with config.json and weights, a .gguf file, or a reachable hub id "
            "(and a --revision it has)",
        ) from None
    except ValueError as exc:
        if "trust_remote_code" in str(exc):
            raise remote_code_error(ref.display) from None
        raise UserError(f"'{ref.display}' is not a causal language model transformers can load: {exc}") from None


def remote_code_error(model: str) -> UserError:
    return UserError(
        f"'{model}' needs its own Python code (its config has an auto_map) to load",
        hint="add --trust-remote-code if you trust its authors: that code runs with your permissions, "
        "so read it first (or pin it with --revision COMMIT)",
    )
