"""The key/value cache the decode loop and batching grow, crop and splice.

transformers models take its `DynamicCache`; the native forward (`sgcli.engine.llama`) takes
`KVCache`, which has the same surface where sgcli touches it (`layers[i].keys` / `.values`,
`update`, `crop`; `replace` sets a layer of either kind) and needs no transformers import. Each
runtime builds its own kind (`sgcli.engine.runtime`), so the loops never ask which they drive.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class KVLayer:
    """One layer's keys and values, [rows, kv heads, columns, head width].

    Why buffers with room: appending by `torch.cat` copied the whole cache at every step, in
    every layer (a batch of 16 spent a quarter of its time there, docs/performance.md, "Zen 5").
    Appends go into spare columns of a buffer this layer allocated itself; `keys` and `values`
    are views of its filled columns (`KVCache.whole`: the buffers themselves). Tensors assigned
    from outside are never written into: the next append moves them into a new buffer first."""

    __slots__ = ("_keys", "_values", "length", "owned")

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None):
        self._keys, self._values, self.owned = keys, values, False
        self.length = 0 if keys is None else keys.shape[-2]

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self._keys is None else self._keys[..., : self.length, :]

    @property
    def values(self) -> torch.Tensor | None:
        return None if self._values is None else self._values[..., : self.length, :]

    def set(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Hold these tensors from now on (never written into: see the class)."""
        self._keys, self._values, self.length, self.owned = keys, values, keys.shape[-2], False

    def append(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        end = self.length + keys.shape[-2]
        if self._keys is None:
            self.set(keys, values)
            return
        if not self.owned or end > self._keys.shape[-2]:
            room = end + max(end // 4, GROW_COLUMNS)
            old_keys, old_values = self.keys, self.values
            # zeros, not empty memory: attention may read the spare columns (masked; see `whole`)
            self._keys = old_keys.new_zeros((*old_keys.shape[:2], room, old_keys.shape[-1]))
            self._values = old_values.new_zeros((*old_values.shape[:2], room, old_values.shape[-1]))
            self._keys[..., : self.length, :] = old_keys
            self._values[..., : self.length, :] = old_values
            self.owned = True
        self._keys[..., self.length : end, :] = keys
        self._values[..., self.length : end, :] = values
        self.length = end


GROW_COLUMNS = 32  # a full buffer grows by a quarter of its columns, and by at least this many


class KVCache:
    """A growing cache: each forward pass appends its columns to every layer."""

    is_croppable = True

    def __init__(self, layers: int | Sequence[tuple[torch.Tensor, torch.Tensor]]):
        self.layers = [KVLayer() for _ in range(layers)] if isinstance(layers, int) else [KVLayer(*kv) for kv in layers]

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Append a pass's keys and values to `layer`; returns all of that layer's."""
        kv = self.layers[layer]
        kv.append(keys, values)
        return kv.keys, kv.values

    def whole(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`layer`'s keys and values with the spare columns after its `get_seq_length()` filled ones
        (zeros, or columns cropped away: finite, for a caller that masks them). Why: a bfloat16
        matrix product copies a strided view of a buffer first; over the whole, contiguous buffer
        it does not, and was faster with the spare columns included (16 rows, 71 of 103 columns:
        99 against 169 us for one layer's attention)."""
        kv = self.layers[layer]
        return kv._keys, kv._values

    def get_seq_length(self, layer: int = 0) -> int:
        return self.layers[layer].length if self.layers else 0

    def crop(self, length: int) -> None:
        """Keep the first `length` columns (negative: drop that many from the end)."""
        if length < 0:
            length = self.get_seq_length() + length
        for kv in self.layers:
            kv.length = min(kv.length, max(length, 0))


def replace(layer, keys: torch.Tensor, values: torch.Tensor) -> None:
    """Give one layer of either cache kind these keys and values (batching splices rows and columns)."""
    if isinstance(layer, KVLayer):
        layer.set(keys, values)
    else:
        layer.keys, layer.values = keys, values
