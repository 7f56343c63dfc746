"""GGUF files converted once into a cached Hugging Face folder (config + a recipe that rebuilds the
weights from the .gguf at load, `gguf_recipe`), and the check that loaded weights are sound.

transformers can read GGUF (`gguf_file=`) but dequantizes every time (~20 s for the default
model) and refuses `save_pretrained` on the result: sgcli runs it once, records for each parameter
which GGUF tensor and transform give the very same float32 bits, and writes that recipe (plus any
parameter it cannot reproduce, as float32) into a folder staged and published in one rename
(`sgcli.cache.conversions`); every later run loads that.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

from sgcli.cache import conversions
from sgcli.cache.paths import converted_dir

Progress = Callable[[str, int, int], None]  # (stage description, step, total steps)


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


FOLDER = "recipe"  # not "model": sgcli before 2026-12 cached float32 weights there (dropped once a recipe is made)


def cached_conversion(gguf: Path) -> Path | None:
    """The usable cached conversion of `gguf`, or None (none yet; a damaged one is set aside, reported)."""
    out = converted_dir(gguf) / FOLDER
    return out if conversions.usable(out, f"conversion of {gguf.name}", gguf) else None


def convert_gguf(gguf: Path, progress: Progress | None = None) -> Path:
    """Convert a GGUF file into a cached Hugging Face recipe folder; returns the folder.

    The cache entry is checked against its manifest (and the .gguf against what it was made from)
    on every use and rebuilt when damaged; the conversion is staged in a unique folder and
    published with one rename (`sgcli.cache.conversions`), so concurrent first runs both succeed."""
    cached = cached_conversion(gguf)
    if cached is not None:
        return cached
    out = converted_dir(gguf) / FOLDER
    staged = conversions.staging(out)  # exit 2 now, before 30 s of work, if the cache is read-only
    try:
        # the recipe is small; parameters it cannot reproduce are float32 (checked before writing)
        with conversions.disk_full_is_exit_2(staged, f"converting {gguf.name}", gguf.stat().st_size):
            _convert_into(gguf, staged, progress)
            published = conversions.publish(staged, out, gguf)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    old = out.with_name("model")
    if old.is_dir():  # an earlier sgcli's float32 copy of the same file (~5x the .gguf)
        conversions.discard(old, f"removed {old}: the float32 weights an earlier sgcli cached (now a recipe)")
    return published


def _convert_into(gguf: Path, folder: Path, progress: Progress | None) -> None:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    from sgcli.engine import gguf_recipe

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    step = lambda text, i: progress and progress(text, i, 3)  # noqa: E731
    step(f"dequantizing {gguf.name} (once; cached afterwards)", 0)
    with _tensor_progress(progress, f"dequantizing {gguf.name} (once; cached afterwards)"):
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    step("matching its weights to the .gguf's tensors", 1)
    room = lambda needed: conversions.ensure_space(folder, needed, f"the dequantized {gguf.name}")  # noqa: E731
    gguf_recipe.write(gguf, model, folder, room)
    config = model.config.to_dict()
    config.pop("quantization_config", None)  # the weights are plain float32 now
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    if model.generation_config is not None:
        model.generation_config.save_pretrained(str(folder))
    step("done", 3)


def weights_problem(model, checked=lambda param: False) -> str | None:
    """`gguf_recipe.value_problem` of each floating-point parameter of `model` (what damaged bytes in
    a cached file become), one pass over each, but those `checked` says were checked already (the
    weights a `gguf_pending.PendingState` child made and checked)."""
    import torch

    from sgcli.engine.gguf_recipe import value_problem

    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point() and param.numel() and not checked(param):
                low, high = (v.item() for v in torch.aminmax(param.detach()))  # one pass, no abs() copy
                if found := value_problem(name, low, high):
                    return found
    return None
