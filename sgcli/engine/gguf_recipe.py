"""A GGUF conversion stored as a recipe: for each Hugging Face parameter, the GGUF tensor it comes from
and the transform that reproduces it, instead of a float32 copy of every weight (517 MB for the
98 MB default model).

transformers stays in charge of what it knows (the config, the tensor names, per-architecture fix-ups
such as llama's Q/K permutation or Gemma's norm offset): the conversion still loads the .gguf once
through it, and each of its float32 parameters is matched here against candidates built from the
GGUF tensors (`gguf_dequant`, bit-identical to the gguf-py code transformers runs): as it is,
un-permuted for the head counts in the config, or less one. A parameter whose candidate is the same
bits becomes a recipe step; one with none (an unknown fix-up, a quant type `gguf_dequant` lacks) is
saved as float32 in `model.safetensors` beside the recipe, as before. Every step is proven on the
file itself, once, and replayed at load from the user's .gguf.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sgcli.engine import gguf_dequant
from sgcli.tokenizers.gguf_meta import TensorInfo, read_tensor_index

if TYPE_CHECKING:
    import torch

RECIPE = "recipe.json"
STORED = "model.safetensors"  # the parameters no recipe step reproduces, float32
FORMAT = 1
_SAMPLES = 61  # elements per fingerprint: picks the candidates worth a full comparison


def has_recipe(folder: Path) -> bool:
    return (folder / RECIPE).is_file()


def write(gguf: Path, model, folder: Path, room: Callable[[int], None] | None = None) -> dict[str, int]:
    """Match `model`'s float32 state (transformers' load of `gguf`) against the file's tensors; write
    the recipe and the unmatched parameters into `folder` (`room(bytes)` first: exit 2 on a full
    disk). Returns counts (matched, stored)."""
    import torch
    from safetensors.torch import save_file

    state = model.state_dict()
    config = model.config.to_dict()
    heads = sorted({h for h in (config.get("num_attention_heads"), config.get("num_key_value_heads")) if h})
    wanted: dict[tuple, list[str]] = {}
    for name, tensor in state.items():
        if tensor.dtype == torch.float32 and tensor.numel():
            wanted.setdefault(_fingerprint(tensor), []).append(name)
    steps: dict[str, dict] = {}
    used: dict[str, TensorInfo] = {}
    for info, weights in _dequantized(gguf):
        for transform, made in _candidates(weights, heads):
            candidate = torch.from_numpy(made)
            for name in wanted.get(_fingerprint(candidate), []):
                if name not in steps and _same_bits(candidate, state[name]):
                    steps[name] = {"tensor": info.name, "transform": transform, "shape": list(state[name].shape)}
                    used[info.name] = info
    stored = {name: t.detach().contiguous().clone() for name, t in state.items() if name not in steps}
    if stored:
        if room is not None:
            room(sum(t.numel() * t.element_size() for t in stored.values()))
        save_file(stored, str(folder / STORED), metadata={"format": "pt"})
    tensors = {name: {"type": i.ggml_type, "shape": list(i.shape), "offset": i.offset} for name, i in used.items()}
    recipe = {
        "format": FORMAT,
        "gguf_size": gguf.stat().st_size,
        "order": list(state),
        "steps": steps,
        "tensors": tensors,
        "stored": sorted(stored),
    }
    (folder / RECIPE).write_text(json.dumps(recipe, indent=1), encoding="utf-8")
    return {"matched": len(steps), "stored": len(stored)}


def _dequantized(gguf: Path) -> Iterator[tuple[TensorInfo, np.ndarray]]:
    """Each tensor of the file that `gguf_dequant` reads, as float32 (one at a time: memory stays low)."""
    raw = _bytes(gguf)
    for info in read_tensor_index(gguf):
        try:
            size = gguf_dequant.nbytes(info.ggml_type, info.shape)
        except ValueError:
            continue  # a type sgcli does not dequantize: whatever it feeds is stored as float32
        if info.offset + size <= raw.size:
            yield info, gguf_dequant.dequantize(raw[info.offset : info.offset + size], info.ggml_type, info.shape)


def _bytes(gguf: Path) -> np.ndarray:
    """The whole file as uint8 over a read-only memory map (nothing is copied)."""
    return np.memmap(gguf, dtype=np.uint8, mode="r")


def _candidates(w: np.ndarray, heads: list[int]) -> Iterator[tuple[str, np.ndarray]]:
    """The transforms transformers' GGUF readers apply, each as (recipe name, result)."""
    yield "identity", w
    if w.ndim == 1:
        yield "minus_one", _apply(w, "minus_one")  # Gemma-style norms stored as 1 + w
    for h in heads:
        if w.ndim and w.shape[0] % (2 * h) == 0:
            yield f"reverse_permute:{h}", _apply(w, f"reverse_permute:{h}")


def _apply(w: np.ndarray, transform: str) -> np.ndarray:
    """`transform` on `w`, as numpy computes it in transformers (same float32 operation, same layout)."""
    if transform == "identity":
        return w
    if transform == "minus_one":
        return w - 1
    if transform.startswith("reverse_permute:"):
        h = int(transform.split(":")[1])
        rest = tuple(w.shape[1:])
        return w.reshape(h, w.shape[0] // h // 2, 2, *rest).swapaxes(1, 2).reshape(w.shape)
    raise ValueError(f"unknown recipe transform {transform!r}")


def _fingerprint(t: torch.Tensor) -> tuple:
    import torch

    flat = t.detach().reshape(-1)
    picks = torch.arange(_SAMPLES, dtype=torch.int64) * (flat.numel() - 1) // (_SAMPLES - 1)
    return (flat.numel(), flat[picks].contiguous().view(torch.int32).numpy().tobytes())


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    import torch

    a, b = a.detach().reshape(-1).contiguous(), b.detach().reshape(-1).contiguous()
    return a.numel() == b.numel() and torch.equal(a.view(torch.int32), b.view(torch.int32))


@dataclass(frozen=True)
class Layout:
    """Where each weight the recipe makes sits in one float32 buffer, in the model's own order, so
    the native forward's fused q/k/v and gate/up rows are adjacent and need no copy (`llama._rows`)."""

    folder: Path
    gguf: Path
    recipe: dict
    places: tuple[tuple[str, int], ...]  # (parameter, elements), in buffer order

    @property
    def elements(self) -> int:
        return sum(count for _, count in self.places)


def layout(folder: Path, gguf: Path) -> Layout:
    """The recipe in `folder`, read and checked against `gguf` (ValueError when the file is not the
    one the recipe was proven on)."""
    recipe = json.loads((folder / RECIPE).read_text(encoding="utf-8"))
    if recipe.get("format") != FORMAT:
        raise ValueError(f"{RECIPE} has format {recipe.get('format')!r}, this sgcli reads {FORMAT}")
    size = gguf.stat().st_size
    if size != recipe["gguf_size"]:
        raise ValueError(f"{gguf} has {size:,} bytes, the recipe was made for {recipe['gguf_size']:,}")
    steps = recipe["steps"]
    made: set[tuple[str, str]] = set()
    places: list[tuple[str, int]] = []
    for name in recipe["order"]:
        if name in steps and (steps[name]["tensor"], steps[name]["transform"]) not in made:
            made.add((steps[name]["tensor"], steps[name]["transform"]))
            places.append((name, _numel(steps[name]["shape"])))
    return Layout(folder, gguf, recipe, tuple(places))


def value_problem(name: str, low: float, high: float) -> str | None:
    """What a weight whose least and greatest values are `low` and `high` says of its bytes: NaN,
    infinite or implausibly large values (|w| > 1e6) are what damaged bytes become. Random bytes
    make ~40% of float32 values that large, so any damaged region is caught; trained weights stay
    far below."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"parameter {name} holds NaN or infinite values"
    peak = max(-low, high)
    if peak > 1e6:
        return f"parameter {name} holds implausible values (|w| up to {peak:.3g})"
    return None


def fill_checked(lay: Layout, buffer: np.ndarray) -> str | None:
    """`fill`, then `value_problem` of every weight made (in the child, off the parent's path)."""
    fill(lay, buffer)
    at = 0
    for name, count in lay.places:
        part = buffer[at : at + count]
        at += count
        if count and (found := value_problem(name, float(part.min()), float(part.max()))):
            return found
    return None


def fill(lay: Layout, buffer: np.ndarray) -> None:
    """Dequantize every weight of `lay` into `buffer` (float32, `lay.elements` long). numpy only: it
    runs before torch is imported, in a child on another core (`gguf_pending`)."""
    raw = _bytes(lay.gguf)
    steps, tensors = lay.recipe["steps"], lay.recipe["tensors"]
    at = 0
    for name, count in lay.places:
        step = steps[name]
        info = tensors[step["tensor"]]
        out = buffer[at : at + count]
        at += count
        size = gguf_dequant.nbytes(info["type"], tuple(info["shape"]))
        if info["offset"] + size > raw.size:
            raise ValueError(f"{lay.gguf} ends inside tensor {step['tensor']}")
        data = raw[info["offset"] : info["offset"] + size]
        if step["transform"] == "identity":
            gguf_dequant.dequantize(data, info["type"], tuple(info["shape"]), out=out)
        else:  # reverse_permute moves rows, minus_one makes new values: built aside, then copied in
            made = gguf_dequant.dequantize(data, info["type"], tuple(info["shape"]))
            out[...] = _apply(made, step["transform"]).reshape(-1)


def state(lay: Layout, buffer: np.ndarray) -> dict[str, torch.Tensor]:
    """The float32 state dict over `buffer` (filled by `fill`; no copy), and the stored parameters."""
    import torch

    steps = lay.recipe["steps"]
    weights = torch.from_numpy(buffer)
    made: dict[tuple[str, str], str] = {}
    result: dict[str, torch.Tensor] = {}
    at = 0
    for name, count in lay.places:
        made[steps[name]["tensor"], steps[name]["transform"]] = name
        result[name] = weights[at : at + count].view(steps[name]["shape"])
        at += count
    for name, step in steps.items():
        result.setdefault(name, result[made[step["tensor"], step["transform"]]].view(step["shape"]))
    if lay.recipe["stored"]:
        from safetensors.torch import load_file

        result.update(load_file(str(lay.folder / STORED)))
    missing = [name for name in lay.recipe["order"] if name not in result]
    if missing:
        raise ValueError(f"the conversion holds no weight {missing[0]}")
    return {name: result[name] for name in lay.recipe["order"]}


def load_state(folder: Path, gguf: Path) -> dict[str, torch.Tensor]:
    """The float32 state dict the recipe in `folder` makes from `gguf` (and the stored parameters),
    every weight in one buffer (`Layout`). Raises ValueError when the file does not hold what the
    recipe was proven on."""
    lay = layout(folder, gguf)
    buffer = gguf_dequant.fresh_float32(lay.elements)
    fill(lay, buffer)
    return state(lay, buffer)


def _numel(shape: list[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
