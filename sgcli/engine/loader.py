"""Loading causal LMs: hub ids, local folders, and GGUF files converted once and cached.

transformers can read GGUF (`gguf_file=`) but dequantizes every time (~20 s for the
default model) and refuses `save_pretrained` on the result. sgcli converts once, writes
safetensors + config itself, and loads that folder on later runs (<1 s).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sgcli.cache.paths import converted_dir
from sgcli.engine.models import ModelRef
from sgcli.errors import UserError

Progress = Callable[[str, int, int], None]  # (stage description, step, total steps)

_MARKER = "sgcli-converted.json"


@dataclass(eq=False)
class LoadedModel:
    model: object  # transformers PreTrainedModel
    ref: ModelRef
    device: str
    dtype: str
    logits_width: int
    load_s: float


def pick_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda was asked for, but torch sees no CUDA device", hint="use --device cpu or auto")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise UserError(f"unknown device '{device}'", hint="use auto, cpu or cuda")
    return device


def pick_dtype(dtype: str, device: str):
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if dtype not in table:
        raise UserError(f"unknown dtype '{dtype}'", hint="use auto, float32, bfloat16 or float16")
    return table[dtype]


@contextlib.contextmanager
def _tensor_progress(progress: Progress | None, description: str):
    """Route transformers' per-tensor GGUF tqdm loop into our progress callback.

    transformers draws its own tqdm bar while dequantizing; that would bypass the CLI's
    rich progress and clutter stderr. Where its module exposes the `tqdm` it uses, it is
    swapped for the duration of the load; elsewhere the load runs unchanged.
    """
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:
        yield
        return
    original = getattr(gguf_utils, "tqdm", None)

    def reporting(iterable, *args, **kwargs):
        items = list(iterable)
        for i, item in enumerate(items):
            if progress:
                progress(description, i, len(items))
            yield item

    gguf_utils.tqdm = reporting
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def convert_gguf(gguf: Path, progress: Progress | None = None) -> Path:
    """Dequantize a GGUF file into a cached Hugging Face folder; returns the folder."""
    out = converted_dir(gguf) / "model"
    if (out / _MARKER).is_file():
        return out
    import torch
    from safetensors.torch import save_model
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    step = lambda text, i: progress and progress(text, i, 3)  # noqa: E731
    step(f"dequantizing {gguf.name} (once; cached afterwards)", 0)
    with _tensor_progress(progress, f"dequantizing {gguf.name} (once; cached afterwards)"):
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    step("writing safetensors to the cache", 1)
    tmp = out.with_name("model.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))  # handles tied embeddings
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the weights are plain float32 now
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    if model.generation_config is not None:
        model.generation_config.save_pretrained(str(tmp))
    (tmp / _MARKER).write_text(json.dumps({"source": str(gguf), "converted_at": time.time()}))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    step("done", 3)
    return out


def load_model(
    ref: ModelRef,
    *,
    device: str = "auto",
    dtype: str = "auto",
    progress: Progress | None = None,
    threads: int | None = None,
) -> LoadedModel:
    """Load a causal LM. `threads` sets torch's CPU threads: on a machine whose cores are busy
    with other work, fewer threads than cores avoids torch's threads waiting on each other."""
    import torch

    if threads is not None:
        if threads < 1:
            raise UserError("--threads must be at least 1")
        torch.set_num_threads(threads)
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    t = time.perf_counter()
    dev = pick_device(device)
    torch_dtype = pick_dtype(dtype, dev)
    location = str(convert_gguf(ref.path, progress)) if ref.kind == "gguf" else ref.location
    try:
        from sgcli.engine.hub import hub_options, offline, offline_error

        options = hub_options() if ref.kind == "hub" else {}
        model = AutoModelForCausalLM.from_pretrained(location, dtype=torch_dtype, **options)
    except OSError as exc:
        if ref.kind == "hub" and offline():
            raise offline_error(ref.location, "model weights") from None
        raise UserError(
            f"cannot load model '{ref.location}': {str(exc).splitlines()[0]}",
            hint="pass a local folder with config.json and weights, a .gguf file, or a reachable hub id",
        ) from None
    except ValueError as exc:
        raise UserError(f"'{ref.location}' is not a causal language model transformers can load: {exc}") from None
    model.to(dev)
    model.eval()
    width = model.get_output_embeddings().weight.shape[0]
    return LoadedModel(model, ref, dev, str(torch_dtype).removeprefix("torch."), width, time.perf_counter() - t)
