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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

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
        for transform, candidate in _candidates(weights, heads):
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


def _dequantized(gguf: Path) -> Iterator[tuple[TensorInfo, torch.Tensor]]:
    """Each tensor of the file that `gguf_dequant` reads, as float32 (one at a time: memory stays low)."""
    raw = _bytes(gguf)
    for info in read_tensor_index(gguf):
        try:
            size = gguf_dequant.nbytes(info.ggml_type, info.shape)
        except ValueError:
            continue  # a type sgcli does not dequantize: whatever it feeds is stored as float32
        if info.offset + size <= raw.numel():
            yield info, gguf_dequant.dequantize(raw[info.offset : info.offset + size], info.ggml_type, info.shape)


def _bytes(gguf: Path) -> torch.Tensor:
    """The whole file as a uint8 tensor over a read-only memory map (nothing is copied)."""
    import warnings

    import numpy as np
    import torch

    with warnings.catch_warnings():  # torch warns that the map is read-only; it is only read
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.memmap(gguf, dtype=np.uint8, mode="r"))


def _candidates(w: torch.Tensor, heads: list[int]) -> Iterator[tuple[str, torch.Tensor]]:
    """The transforms transformers' GGUF readers apply, each as (recipe name, result)."""
    yield "identity", w
    if w.dim() == 1:
        yield "minus_one", _apply(w, "minus_one")  # Gemma-style norms stored as 1 + w
    for h in heads:
        if w.dim() and w.shape[0] % (2 * h) == 0:
            yield f"reverse_permute:{h}", _apply(w, f"reverse_permute:{h}")


def _apply(w: torch.Tensor, transform: str) -> torch.Tensor:
    """`transform` on `w`, as numpy computes it in transformers (same float32 operation, same layout)."""
    if transform == "identity":
        return w
    if transform == "minus_one":
        return w - 1
    if transform.startswith("reverse_permute:"):
        h = int(transform.split(":")[1])
        rest = tuple(w.shape[1:])
        return w.reshape(h, w.shape[0] // h // 2, 2, *rest).transpose(1, 2).reshape(w.shape)
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


def load_state(folder: Path, gguf: Path) -> dict[str, torch.Tensor]:
    """The float32 state dict the recipe in `folder` makes from `gguf` (and the stored parameters).
    Every weight goes into one buffer, in the model's own order, so the native forward's fused
    q/k/v and gate/up rows are adjacent and need no copy (`llama._rows`). Raises ValueError when
    the file does not hold what the recipe was proven on."""
    import torch

    recipe = json.loads((folder / RECIPE).read_text(encoding="utf-8"))
    if recipe.get("format") != FORMAT:
        raise ValueError(f"{RECIPE} has format {recipe.get('format')!r}, this sgcli reads {FORMAT}")
    raw = _bytes(gguf)
    if raw.numel() != recipe["gguf_size"]:
        raise ValueError(f"{gguf} has {raw.numel():,} bytes, the recipe was made for {recipe['gguf_size']:,}")
    steps, tensors = recipe["steps"], recipe["tensors"]
    made: dict[tuple[str, str], str] = {}  # (tensor, transform) -> the first parameter made from it
    layout: list[tuple[str, int]] = []
    for name in recipe["order"]:
        if name in steps and (steps[name]["tensor"], steps[name]["transform"]) not in made:
            made[steps[name]["tensor"], steps[name]["transform"]] = name
            layout.append((name, _numel(steps[name]["shape"])))
    buffer = torch.empty(sum(n for _, n in layout), dtype=torch.float32)
    state: dict[str, torch.Tensor] = {}
    at = 0
    for name, count in layout:
        step = steps[name]
        info = tensors[step["tensor"]]
        out = buffer[at : at + count]
        at += count
        size = gguf_dequant.nbytes(info["type"], tuple(info["shape"]))
        if info["offset"] + size > raw.numel():
            raise ValueError(f"{gguf} ends inside tensor {step['tensor']}")
        data = raw[info["offset"] : info["offset"] + size]
        if step["transform"] == "identity":
            gguf_dequant.dequantize(data, info["type"], tuple(info["shape"]), out=out)
        else:  # reverse_permute moves rows, minus_one makes new values: built aside, then copied in
            w = _apply(gguf_dequant.dequantize(data, info["type"], tuple(info["shape"])), step["transform"])
            out.copy_(w.reshape(-1))
        state[name] = out.view(step["shape"])
    for name, step in steps.items():
        state.setdefault(name, state[made[step["tensor"], step["transform"]]].view(step["shape"]))
    if recipe["stored"]:
        from safetensors.torch import load_file

        state.update(load_file(str(folder / STORED)))
    missing = [name for name in recipe["order"] if name not in state]
    if missing:
        raise ValueError(f"the conversion holds no weight {missing[0]}")
    return {name: state[name] for name in recipe["order"]}


def _numel(shape: list[int]) -> int:
    count = 1
    for dim in shape:
        count *= dim
    return count
