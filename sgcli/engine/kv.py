"""The key/value cache the decode loop and batching grow, crop and splice.

transformers models take its `DynamicCache`; the native runtime (`sgcli.engine.llama`) takes
`KVCache`, which has the same surface where sgcli touches it (`layers[i].keys` / `.values`,
`update`, `crop`) and needs no transformers import. `empty_cache` and `cache_from` pick the one
a model takes, so the loops never ask which runtime they drive.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class KVLayer:
    """One layer's keys and values, [rows, kv heads, columns, head width]."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None):
        self.keys, self.values = keys, values


class KVCache:
    """A growing cache: each forward pass appends its columns to every layer."""

    is_croppable = True

    def __init__(self, layers: int | Sequence[tuple[torch.Tensor, torch.Tensor]]):
        self.layers = [KVLayer() for _ in range(layers)] if isinstance(layers, int) else [KVLayer(*kv) for kv in layers]

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Append a pass's keys and values to `layer`; returns all of that layer's."""
        kv = self.layers[layer]
        if kv.keys is None:
            kv.keys, kv.values = keys, values
        else:
            kv.keys, kv.values = torch.cat([kv.keys, keys], dim=-2), torch.cat([kv.values, values], dim=-2)
        return kv.keys, kv.values

    def get_seq_length(self, layer: int = 0) -> int:
        keys = self.layers[layer].keys if self.layers else None
        return 0 if keys is None else keys.shape[-2]

    def crop(self, length: int) -> None:
        """Keep the first `length` columns (negative: drop that many from the end)."""
        if length < 0:
            length = self.get_seq_length() + length
        for kv in self.layers:
            if kv.keys is not None:
                kv.keys, kv.values = kv.keys[..., :length, :], kv.values[..., :length, :]


def empty_cache(model):
    """An empty cache of the kind `model` takes (None where a transformers model cannot build one
    from its config: it then makes its own, which cannot be cropped)."""
    make = getattr(model, "new_cache", None)
    if make is not None:
        return make()
    from transformers.cache_utils import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except (TypeError, ValueError, AttributeError):
        return None


def cache_from(model, layers: Sequence[tuple[torch.Tensor, torch.Tensor]]):
    """A cache of the kind `model` takes, holding `layers` (keys, values per layer)."""
    if getattr(model, "new_cache", None) is not None:
        return KVCache(layers)
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers)


def plain_layers(model) -> bool:
    """Whether every layer of `model`'s cache simply grows (batching splices such tensors by hand;
    sliding-window and hybrid caches it cannot)."""
    if getattr(model, "new_cache", None) is not None:
        return True
    from transformers.cache_utils import DynamicLayer

    cache = empty_cache(model)
    return cache is not None and bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)
