"""Continuous batched decoding for JSONL input: many requests, one forward pass per step.

Why: a one-row decode step is bound by reading the weights; rows decoded together share each
read, so a step of 16 rows costs a few times a step of one, not 16 times. Each row keeps its own
matcher, stop strings and token budget; a row that ends leaves the batch and a waiting request
takes its place (continuous batching). Rows of different lengths share one KV cache, aligned on
the right and padded on the left with masked zero columns; explicit position ids keep each row's
positions its own, so greedy outputs match the single-stream loop. Prompts that share a head
(system prompt, chat-template preamble) prefill it once and reuse its KV cache.

Jump-forward is not used inside batches: every token is one batched step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from sgcli.backends.base import Compiled
from sgcli.engine.decode import cache_keyword
from sgcli.engine.loader import LoadedModel
from sgcli.engine.sampling import Masker, SamplingParams
from sgcli.engine.sequence import Finished, SequenceState

MIN_SHARED_PREFIX = 8  # tokens; shorter shared heads are cheaper to recompute than to copy


class Row:
    """One request of a batch: its place, prompt and `SequenceState` (the single-stream loop's
    per-token rules), without events."""

    def __init__(self, index: int, prompt_ids: list[int], seq: SequenceState):
        self.index, self.prompt_ids, self.seq = index, prompt_ids, seq
        self.forward_passes = 0  # model calls this row took part in (its prefill, then batched steps)
        self.finished: Finished | None = None

    def step(self, logits: torch.Tensor, masker: Masker) -> int | None:
        """Pick and take the next token from this row's logits; None once the row has finished."""
        self.forward_passes += 1
        seq = self.seq
        token = seq.pick(logits, masker)
        if token is not None:
            seq.take(token)
        if not seq.done:
            return token
        seq.flush()
        self.finished = seq.finished(len(self.prompt_ids), self.forward_passes)
        return None


def _plain_cache_layers(model) -> bool:
    """Batching splices KV tensors by hand, so it needs the plain growing cache on every layer."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=model.config)
    return bool(cache.layers) and all(type(layer) is DynamicLayer for layer in cache.layers)


def unsupported_reason(lm: LoadedModel) -> str | None:
    """Why this model cannot be batched (None when it can)."""
    if not _plain_cache_layers(lm.model):
        return f"{lm.ref.display} uses a sliding-window or hybrid KV cache, which batching does not splice"
    return None


def _pad_left(t: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    if n == 0:
        return t
    shape = list(t.shape)
    shape[dim] = n
    return torch.cat([t.new_zeros(shape), t], dim=dim)


class KVBatch:
    """The batch's shared KV cache: rows aligned on the right, left-padded with masked zero columns."""

    def __init__(self, device: str):
        self.device = device
        self.cache = None  # transformers DynamicCache, batch dimension = rows
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=device)
        self.rows: list[Row] = []
        self.pos: list[int] = []  # next position id per row
        self.last: list[int] = []  # next input token per row

    def add(self, row: Row, cache, token: int) -> None:
        """Join a prefilled row (its own batch-1 cache) to the batch."""
        n = cache.layers[0].keys.shape[-2]
        if self.cache is None:
            self.cache = cache
            self.mask = torch.ones((1, n), dtype=torch.long, device=self.device)
        else:
            width = max(n, self.mask.shape[1])
            mine, theirs = width - self.mask.shape[1], width - n
            for layer, new in zip(self.cache.layers, cache.layers):
                layer.keys = torch.cat([_pad_left(layer.keys, mine, -2), _pad_left(new.keys, theirs, -2)])
                layer.values = torch.cat([_pad_left(layer.values, mine, -2), _pad_left(new.values, theirs, -2)])
            ones = torch.ones((1, n), dtype=torch.long, device=self.device)
            self.mask = torch.cat([_pad_left(self.mask, mine, 1), _pad_left(ones, theirs, 1)])
        self.rows.append(row)
        self.pos.append(len(row.prompt_ids))
        self.last.append(token)

    def forward(self, model, cache_kw: str) -> torch.Tensor:
        """One decode step for every row; returns float logits [rows, vocab]."""
        mask = torch.cat([self.mask, self.mask.new_ones((len(self.rows), 1))], dim=1)
        out = model(
            input_ids=torch.tensor(self.last, device=self.device)[:, None],
            attention_mask=mask,
            position_ids=torch.tensor(self.pos, device=self.device)[:, None],
            use_cache=True,
            **{cache_kw: self.cache},
        )
        self.cache = getattr(out, cache_kw)
        self.mask = mask
        self.pos = [p + 1 for p in self.pos]
        return out.logits[:, -1].float()

    def keep(self, keep: list[int]) -> None:
        """Drop the rows not in `keep`, then the left columns no remaining row uses."""
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        self.pos = [self.pos[i] for i in keep]
        self.last = [self.last[i] for i in keep]
        if not keep:
            self.cache, self.mask = None, self.mask[:0, :0]
            return
        index = torch.tensor(keep, device=self.device)
        self.mask = self.mask.index_select(0, index)
        used = self.mask.any(dim=0)
        first = int(used.int().argmax())  # the first column any row attends to
        self.mask = self.mask[:, first:]
        for layer in self.cache.layers:
            layer.keys = layer.keys.index_select(0, index)[:, :, first:]
            layer.values = layer.values.index_select(0, index)[:, :, first:]


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


class PrefixStore:
    """KV caches of shared prompt heads, each computed once (extending a shorter stored head
    where one fits) and dropped after the last request that uses it has been admitted."""

    def __init__(self, model, cache_kw: str, device: str, prompts: Sequence[Sequence[int]], share: bool = True):
        self.model, self.cache_kw, self.device = model, cache_kw, device
        self.lengths = shared_prefixes(prompts) if share else [0] * len(prompts)
        self.uses: dict[tuple[int, ...], int] = {}
        for p, n in zip(prompts, self.lengths):
            if n:
                key = tuple(p[:n])
                self.uses[key] = self.uses.get(key, 0) + 1
        self.kv: dict[tuple[int, ...], list] = {}
        self.reused_tokens = 0  # prompt tokens not prefilled again thanks to the store

    def take(self, i: int, ids: Sequence[int]):
        """(a fresh cache holding prompt i's shared head or None, how many tokens it holds)."""
        from transformers import DynamicCache

        n = self.lengths[i]
        if not n:
            return None, 0
        key = tuple(ids[:n])
        if key in self.kv:
            self.reused_tokens += n
        else:
            self.kv[key] = self._compute(key)
        kv = self.kv[key]
        self.uses[key] -= 1
        if not self.uses[key]:
            del self.kv[key]
        return DynamicCache(ddp_cache_data=kv), n

    def _compute(self, key: tuple[int, ...]) -> list:
        from transformers import DynamicCache

        base = max((k for k in self.kv if len(k) < len(key) and key[: len(k)] == k), key=len, default=())
        if base:
            self.reused_tokens += len(base)
        cache = DynamicCache(ddp_cache_data=self.kv[base]) if base else None
        ids = torch.tensor([key[len(base) :]], device=self.device)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self.cache_kw: cache})
        return [(layer.keys, layer.values) for layer in getattr(out, self.cache_kw).layers]


def _prefill(lm: LoadedModel, cache_kw: str, ids: Sequence[int], cache, start: int):
    """The prompt after its cached head; logits for the last position only."""
    tail = torch.tensor([list(ids[start:])], device=lm.device)
    out = lm.model(input_ids=tail, use_cache=True, logits_to_keep=1, **{cache_kw: cache})
    return getattr(out, cache_kw), out.logits[0, -1].float()


@dataclass
class BatchStats:
    """What a batched run did, for benchmarks and summaries."""

    steps: int = 0
    row_steps: int = 0  # sum over steps of the rows decoded together
    prefill_tokens: int = 0
    reused_prefix_tokens: int = 0


def decode_batch(
    lm: LoadedModel,
    prompts: Sequence[Sequence[int]],
    compiled: Compiled,
    *,
    params: SamplingParams,
    max_tokens: int | Sequence[int],
    batch_size: int,
    stop: Sequence[str] = (),
    think_end: str | None = None,
    share_prefix: bool = True,
    stats: BatchStats | None = None,
) -> Iterator[tuple[int, Finished]]:
    """Decode every prompt, `batch_size` rows at a time; yields (prompt index, Finished) as rows
    end, in completion order. A row's error (grammar dead end, rejected token) ends that row only.
    `max_tokens` is one budget for every prompt, or one per prompt."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    stats = stats if stats is not None else BatchStats()
    cache_kw = cache_keyword(lm.model)
    store = PrefixStore(lm.model, cache_kw, lm.device, prompts, share=share_prefix)
    masker = Masker(lm.logits_width, lm.device)

    def new_row(i: int) -> Row:
        budget = max_tokens if isinstance(max_tokens, int) else max_tokens[i]
        seq = SequenceState(compiled, params, max_tokens=budget, stop=stop, think_end=think_end, device=lm.device)
        return Row(i, list(prompts[i]), seq)

    batch = KVBatch(lm.device)
    waiting = iter(range(len(prompts)))
    with torch.inference_mode():
        while True:
            for i in _take(waiting, batch_size - len(batch.rows)):
                row = new_row(i)
                cache, start = store.take(i, row.prompt_ids)
                cache, logits = _prefill(lm, cache_kw, row.prompt_ids, cache, start)
                stats.prefill_tokens += len(row.prompt_ids) - start
                token = row.step(logits, masker)
                if token is None:
                    yield i, row.finished
                else:
                    batch.add(row, cache, token)
            if not batch.rows:
                break
            yield from _step(lm, cache_kw, batch, masker, stats)
    stats.reused_prefix_tokens = store.reused_tokens


def _take(waiting: Iterator[int], n: int) -> Iterable[int]:
    for _ in range(n):
        i = next(waiting, None)
        if i is None:
            return
        yield i


def _step(lm: LoadedModel, cache_kw: str, batch: KVBatch, masker: Masker, stats: BatchStats):
    """One forward pass for the whole batch, then each row takes its token; ended rows leave."""
    logits = batch.forward(lm.model, cache_kw)
    stats.steps += 1
    stats.row_steps += len(batch.rows)
    keep = []
    for i, row in enumerate(batch.rows):
        token = row.step(logits[i], masker)
        if token is None:
            yield row.index, row.finished
        else:
            batch.last[i] = token
            keep.append(i)
    batch.keep(keep)
