"""Prompt heads shared between requests, and many sequences run in one padded pass.

Why: requests of one batch often start alike (a system prompt, a chat template's preamble, the
same question asked n times). `PrefixStore` finds the heads they share with one sort, computes
each head's KV cache once (on top of the shorter shared head it extends) and hands copies out;
`extend` runs many sequences after their cached heads side by side, padded on the right, which
both the store and the batch's prefill (`sgcli.engine.batching`) use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from sgcli.engine.runtime import Runtime

MIN_SHARED_PREFIX = 8  # tokens; shorter shared heads are cheaper to recompute than to copy
PREFILL_TOKENS = 2048  # at most this many (padded) prompt positions in one pass


def pad_left(t: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    if n == 0:
        return t
    shape = list(t.shape)
    shape[dim] = n
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def _common_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def shared_prefixes(prompts: Sequence[Sequence[int]], minimum: int = MIN_SHARED_PREFIX) -> list[int]:
    """Per prompt, the length of the longest head it shares with another prompt (0 when under
    `minimum`), leaving at least one token of its own to prefill. Neighbours in sorted order
    hold every longest shared head, so one sort finds them all."""
    order = sorted(range(len(prompts)), key=lambda i: list(prompts[i]))
    lengths = [0] * len(prompts)
    for a, b in zip(order, order[1:]):
        n = _common_length(prompts[a], prompts[b])
        lengths[a], lengths[b] = max(lengths[a], n), max(lengths[b], n)
    capped = [min(n, len(p) - 1) for n, p in zip(lengths, prompts)]
    return [n if n >= minimum else 0 for n in capped]


def neighbour_heads(prompts: Sequence[Sequence[int]], minimum: int = MIN_SHARED_PREFIX) -> set[tuple[int, ...]]:
    """Every head that two prompts next to each other in sorted order share (at least `minimum`
    long): besides each prompt's longest shared head, the shorter ones the longest heads extend,
    such as one system prompt under many repeated requests."""
    ordered = sorted(prompts, key=list)
    heads = set()
    for a, b in zip(ordered, ordered[1:]):
        n = _common_length(a, b)
        if n >= minimum:
            heads.add(tuple(a[:n]))
    return heads


def _longest_proper_prefix(head: tuple[int, ...], heads: set, lengths: list[int], tries: int = 32):
    """The longest of `heads` that is a proper prefix of `head` (checking at most `tries` lengths); () if none."""
    shorter = [n for n in lengths if n < len(head)][-tries:]
    return next((head[:n] for n in reversed(shorter) if head[:n] in heads), ())


class PrefixStore:
    """KV caches of shared prompt heads, each computed once, on top of the longest shorter shared
    head it extends (computed once too), and dropped after the last use: the last request whose
    head it is admitted, the last longer head built on it computed."""

    def __init__(self, runtime: Runtime, device: str, prompts: Sequence[Sequence[int]], share: bool = True):
        self.runtime, self.device = runtime, device
        self.lengths = shared_prefixes(prompts) if share else [0] * len(prompts)
        self.uses: dict[tuple[int, ...], int] = {}
        for p, n in zip(prompts, self.lengths):
            if n:
                key = tuple(p[:n])
                self.uses[key] = self.uses.get(key, 0) + 1
        heads = set(self.uses) | (neighbour_heads(prompts) if share else set())
        lengths = sorted({len(h) for h in heads})
        self.base = {h: _longest_proper_prefix(h, heads, lengths) for h in heads}
        for h in sorted(heads, key=len, reverse=True):  # longer heads first: a base's users are counted before it
            if self.uses.get(h) and self.base[h]:
                self.uses[self.base[h]] = self.uses.get(self.base[h], 0) + 1
        self.kv: dict[tuple[int, ...], list] = {}
        self.reused_tokens = 0  # prompt tokens not prefilled again thanks to the store
        self.computed_tokens = 0  # prompt tokens the store ran through the model
        self.passes = 0  # model calls the store made

    def key(self, i: int, ids: Sequence[int]) -> tuple[int, ...] | None:
        """Prompt i's shared head (None where it shares none)."""
        return tuple(ids[: self.lengths[i]]) if self.lengths[i] else None

    def take(self, i: int, ids: Sequence[int]) -> tuple[list | None, int]:
        """(the KV tensors of prompt i's shared head per layer, or None; how many tokens they hold)."""
        key = self.key(i, ids)
        if key is None:
            return None, 0
        if key in self.kv:
            self.reused_tokens += len(key)
        else:
            self.prepare([key])
        kv = self.kv[key]
        self._release(key)
        return kv, len(key)

    def _release(self, key: tuple[int, ...]) -> None:
        self.uses[key] -= 1
        if not self.uses[key]:
            del self.kv[key]

    def prepare(self, keys: Iterable[tuple[int, ...] | None]) -> None:
        """Compute the KV of the `keys` not stored yet and of every base under them: heads whose
        bases are ready go side by side in one pass (`extend`), a level of nesting at a time."""
        needed: set[tuple[int, ...]] = set()
        for head in keys:
            while head and head not in self.kv and head not in needed:
                needed.add(head)
                head = self.base[head]
        while needed:
            level = sorted(h for h in needed if not self.base[h] or self.base[h] in self.kv)
            needed.difference_update(level)
            for group in prefill_groups([len(h) - len(self.base[h]) for h in level]):
                heads = [level[g] for g in group]
                bases = [(self.kv[self.base[h]] if self.base[h] else None, len(self.base[h])) for h in heads]
                cache, mask, _ = extend(self.runtime, self.device, heads, bases)
                self.passes += 1
                for r, head in enumerate(heads):
                    live = mask[r].nonzero().squeeze(1)  # this head's own columns, padding left out
                    self.kv[head] = [
                        (layer.keys[r : r + 1].index_select(2, live), layer.values[r : r + 1].index_select(2, live))
                        for layer in cache.layers
                    ]
                    base = self.base[head]
                    self.computed_tokens += len(head) - len(base)
                    if base:
                        self.reused_tokens += len(base)
                        self._release(base)


def prefill_groups(tails: Sequence[int], limit: int = PREFILL_TOKENS) -> list[list[int]]:
    """Indices of the prompts to prefill together, given the tokens each still needs: shortest
    first, a group closing before its padding would outweigh its tokens or pass `limit` (a prompt
    longer than the limit goes alone)."""
    groups: list[list[int]] = []
    group, real = [], 0
    for i in sorted(range(len(tails)), key=lambda i: tails[i]):
        n = tails[i]
        if group and ((len(group) + 1) * n > 2 * (real + n) or (len(group) + 1) * n > limit):
            groups.append(group)
            group, real = [], 0
        group.append(i)
        real += n
    if group:
        groups.append(group)
    return groups


def stacked_heads(runtime: Runtime, heads: Sequence[tuple[list | None, int]], device: str):
    """One cache of the kind `runtime` takes, holding every row's shared head, left-padded to the
    longest (None where no row has one), and its mask."""
    width = max(n for _, n in heads)
    mask = torch.tensor([[0] * (width - n) + [1] * n for _, n in heads], dtype=torch.long, device=device)
    if not width:
        return None, mask
    sample = next(kv for kv, n in heads if n)
    layers = []
    for layer, (keys, _) in enumerate(sample):
        empty = keys.new_zeros((1, keys.shape[1], width, keys.shape[3]))
        rows_k = [empty if kv is None else pad_left(kv[layer][0], width - n, -2) for kv, n in heads]
        rows_v = [empty if kv is None else pad_left(kv[layer][1], width - n, -2) for kv, n in heads]
        layers.append((torch.cat(rows_k), torch.cat(rows_v)))
    return runtime.cache_from(layers), mask


def extend(runtime: Runtime, device: str, sequences: Sequence[Sequence[int]], heads):
    """Run many sequences in one pass, each after its cached head (from `heads`: KV per layer or
    None, and its length), the rest padded on the right (masked). Returns the cache, its mask and
    each sequence's hidden state at its last token."""
    cache, head_mask = stacked_heads(runtime, heads, device)
    tails = [list(seq[n:]) for seq, (_, n) in zip(sequences, heads)]
    width = max(len(t) for t in tails)
    ids = torch.tensor([t + [0] * (width - len(t)) for t in tails], device=device)
    tail_mask = torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in tails], device=device)
    positions = torch.tensor([list(range(n, n + width)) for _, n in heads], device=device)
    mask = torch.cat([head_mask, tail_mask], dim=1)
    hidden, cache = runtime.hidden(ids, cache, attention_mask=mask, position_ids=positions)
    ends = torch.tensor([len(t) - 1 for t in tails], device=device)
    return cache, mask, hidden[torch.arange(len(tails), device=device), ends]
