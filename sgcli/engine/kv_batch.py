"""The KV cache a batch of rows shares, and the step that feeds every row through the model.

Rows of different lengths share one cache (`sgcli.engine.kv`), aligned on the right and padded on
the left with masked zero columns; explicit position ids keep each row's positions its own. A step
feeds each row its waiting tokens (several where the grammar forced some) and then its jump-forward
draft, as wide as `feed_width` allows; draft tokens the model turned down and backtracked tokens
are masked, not cropped, since the other rows share the cache, and the holes this leaves are
compacted away once they are most of it. A step is `feed` (what each row is fed), the pass, then
`took`; rows joining the batch form a `KVBatch` of their own (`unprefilled`) whose prompts are fed
in chunks, in the same pass as the batch's step. The decode loop around it (rows, masks, sampling,
admission of waiting requests) is `sgcli.engine.batching`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from sgcli.engine.kv import replace
from sgcli.engine.prefix import extend, pad_left, stacked_heads
from sgcli.engine.ragged import PassInput
from sgcli.engine.runtime import Runtime

# On a CPU, drafts widen a step only up to this many fed positions in all (rows x width); beyond,
# they fill what the step's real tokens leave as padding. Measured (docs/performance.md, Batch):
# drafts made a batch of 1 1.12x (float32) to 1.67x (bfloat16) faster and were even at 4, while
# widening steps of 16 rows for them ranged from 0.88x to 1.06x: there a pass is compute-bound
# and the positions of turned-down drafts cost what real tokens cost.
# On a CPU with AMX tiles, where a pass of 16 x 4 positions cost 1.38x one of 16 x 1
# (`benchmarks/pass_width.py`), a bound of 64 measured no faster all the same: 212.9 against
# 218.3 tok/s at batch 16 (`batch_throughput.py --draft-positions 16`, bfloat16, 3 rounds), since
# the drafts a wider step takes gain what the step costs more.
DRAFT_POSITIONS = 16
COMPACT_DEAD_SHARE = 0.5  # compact the KV cache once more than this share of its columns is padding


class KVBatch:
    """The batch's shared KV cache: rows aligned on the right, left-padded with masked zero columns
    (and masked columns inside a row where its prompt was padded at prefill)."""

    def __init__(self, device: str):
        self.device = device
        self.cache = None  # the model's growing cache (sgcli.engine.kv), batch dimension = rows
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=device)
        self.rows: list = []  # the batch's `Row`s (sgcli.engine.batching), in cache order
        self.pos: list[int] = []  # next position id per row
        self.last: list[list[int]] = []  # next input tokens per row
        self.drafted: list[list[int]] = []  # per row, the draft tokens fed after them in the last step
        self.step_columns: list[int] = []  # per row, the first cache column of its last step's draft

    def join(self, other: KVBatch) -> None:
        """Take in the rows of another batch (a freshly prefilled group), aligning both on the right."""
        if not other.rows:
            return
        if not self.rows:
            self.cache, self.mask = other.cache, other.mask
        else:
            width = max(self.mask.shape[1], other.mask.shape[1])
            mine, theirs = width - self.mask.shape[1], width - other.mask.shape[1]
            for layer, new in zip(self.cache.layers, other.cache.layers):
                keys = torch.cat([pad_left(layer.keys, mine, -2), pad_left(new.keys, theirs, -2)])
                values = torch.cat([pad_left(layer.values, mine, -2), pad_left(new.values, theirs, -2)])
                replace(layer, keys, values)
            self.mask = torch.cat([pad_left(self.mask, mine, 1), pad_left(other.mask, theirs, 1)])
        self.rows += other.rows
        self.pos += other.pos
        self.last += other.last
        self.drafted += [[] for _ in other.rows]
        self.step_columns += [0 for _ in other.rows]

    def forward(self, runtime: Runtime, chunk: int | None = None) -> tuple[list[torch.Tensor], list[bool]]:
        """One decode step for every row (`feed`, then the pass, then `took`). Returns per row the
        hidden states from its last waiting token on [1 + fed draft tokens, width], and whether it
        was fed all its waiting tokens (needs a new one)."""
        given = self.feed(runtime, chunk)
        hidden, cache = runtime.hidden(
            given.input_ids, given.cache, attention_mask=given.attention_mask, position_ids=given.position_ids
        )
        return self.took(hidden, cache)

    def feed(self, runtime: Runtime, chunk: int | None = None) -> PassInput:
        """What this step feeds: each row the first of its waiting `last` tokens (several where the
        grammar forced some, or its prompt where it joined unprefilled), then its draft where all its
        waiting tokens fit (shorter feeds padded on the right, masked). Without `chunk`, as many as
        `feed_width` allows, drafts filling the padding; with `chunk` (a runtime whose passes pack
        padding out, so a row costs its own tokens), up to the widest feed that keeps the rows'
        tokens within `chunk` in all, and on a CPU a draft only up to `DRAFT_POSITIONS` shared out."""
        drafts = [row.draft for row in self.rows]
        cpu = torch.device(self.device).type == "cpu"
        share = max(1, DRAFT_POSITIONS // len(self.rows)) if cpu else None  # drafts widen a CPU step while cheap
        if chunk is not None:
            width = chunk_width([len(feed) for feed in self.last], chunk)
            room = [width if share is None else max(share, min(len(feed), width)) for feed in self.last]
        else:
            width = feed_width([len(feed) for feed in self.last], self.device)
            draft_width = feed_width([len(feed) + len(draft) for feed, draft in zip(self.last, drafts)], self.device)
            width = max(width, draft_width if share is None else min(draft_width, share))
            room = [width] * len(self.rows)
        feeds = [feed[:width] for feed in self.last]
        self.drafted = [
            draft[: r - len(feed)] if len(feed) <= width else [] for feed, draft, r in zip(self.last, drafts, room)
        ]
        for row, feed in zip(self.rows, self.last):
            if len(feed) <= width:  # its next token comes after this step, and a new draft with it
                row.draft = []
        self.last = [feed[width:] for feed in self.last]
        start = self.mask.shape[1]
        self.step_columns = [start + len(feed) for feed in feeds]
        fed = [feed + draft for feed, draft in zip(feeds, self.drafted)]
        width = max(len(f) for f in fed)
        ids = torch.tensor([f + [0] * (width - len(f)) for f in fed], device=self.device)
        fresh = torch.tensor([[1] * len(f) + [0] * (width - len(f)) for f in fed], device=self.device)
        mask = torch.cat([self.mask, fresh.to(self.mask.dtype)], dim=1)
        positions = torch.tensor([list(range(p, p + width)) for p in self.pos], device=self.device)
        self.mask = mask
        self._feeds, self._fed = feeds, fed
        self.pos = [p + len(f) for p, f in zip(self.pos, fed)]
        return PassInput(ids, mask, positions, self.cache)

    def took(self, hidden: torch.Tensor, cache) -> tuple[list[torch.Tensor], list[bool]]:
        """The pass `feed` prepared has run: keep its cache; per row, the hidden states from its last
        waiting token on, and whether it was fed all its waiting tokens."""
        self.cache = cache
        spans = [hidden[r, len(feed) - 1 : len(f)] for r, (feed, f) in enumerate(zip(self._feeds, self._fed))]
        return spans, [not rest for rest in self.last]

    def hide_draft(self, r: int, rejected: int) -> None:
        """Row `r` kept all but the last `rejected` tokens of the draft it was fed: their cache
        columns are masked from now on and its next token takes the first one's position."""
        if rejected:
            first = self.step_columns[r] + len(self.drafted[r]) - rejected
            self.mask[r, first : first + rejected] = 0
            self.pos[r] -= rejected

    def backtrack(self, r: int) -> None:
        """Row `r` is at a dead end: undo its last token (`SequenceState.backtrack`), mask its cache
        columns back to the tokens before the one now last, and feed that one again (with any kept
        tokens not fed yet), so the next step gives the undone position's logits."""
        row = self.rows[r]
        row.seq.backtrack()
        tokens = row.prompt_ids + row.seq.ids  # every kept token is fed, or waiting to be (as in decode)
        keep = min(self.pos[r], len(tokens) - 1)
        drop = self.pos[r] - keep
        if drop:
            live = self.mask[r].nonzero().squeeze(1)
            self.mask[r, live[-drop:]] = 0
        self.pos[r], self.last[r] = keep, tokens[keep:]
        row.draft, row.ahead = [], None

    def compact(self) -> None:
        """Once most columns are padding (feeds of different lengths leave masked holes), move each
        row's live columns together on the right. Keys carry their positions already (rotary
        embeddings are applied before caching), so moving columns changes nothing they attend to."""
        live = self.mask.bool()
        counts = live.sum(dim=1)
        if live.numel() - int(counts.sum()) <= COMPACT_DEAD_SHARE * live.numel():
            return
        width = int(counts.max())
        index = torch.zeros((len(self.rows), width), dtype=torch.long, device=self.device)
        for r in range(len(self.rows)):
            columns = live[r].nonzero().squeeze(1)
            index[r, width - len(columns) :] = columns
        self.mask = (torch.arange(width, device=self.device)[None] >= width - counts[:, None]).to(self.mask.dtype)
        for layer in self.cache.layers:
            shape = (-1, layer.keys.shape[1], -1, layer.keys.shape[3])
            where = index[:, None, :, None].expand(shape)
            replace(layer, layer.keys.gather(2, where), layer.values.gather(2, where))

    def keep(self, keep: list[int]) -> None:
        """Drop the rows not in `keep`, then the left columns no remaining row uses."""
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        self.pos = [self.pos[i] for i in keep]
        self.last = [self.last[i] for i in keep]
        self.drafted = [self.drafted[i] for i in keep]
        self.step_columns = [self.step_columns[i] for i in keep]
        if not keep:
            self.cache, self.mask = None, self.mask[:0, :0]
            return
        index = torch.tensor(keep, device=self.device)
        self.mask = self.mask.index_select(0, index)
        used = self.mask.any(dim=0)
        first = int(used.int().argmax())  # the first column any row attends to
        self.mask = self.mask[:, first:]
        for layer in self.cache.layers:
            replace(
                layer,
                layer.keys.index_select(0, index)[:, :, first:],
                layer.values.index_select(0, index)[:, :, first:],
            )


def feed_width(waiting: Sequence[int], device) -> int:
    """How many tokens each row is fed in one step, given how many each has waiting. Every row is
    padded to that width, so on a CPU, where the step is bound by its matrix products and padding
    costs as much as real tokens, the width stays where at most a quarter of the fed positions are
    padding (1 unless most rows have forced tokens waiting); on an accelerator, where a step costs
    about the same for a few more positions, every waiting token is fed."""
    longest = max(waiting)
    if torch.device(device).type != "cpu":
        return longest
    width = 1
    for k in range(2, longest + 1):
        real = sum(min(n, k) for n in waiting)
        if 4 * (len(waiting) * k - real) <= len(waiting) * k:
            width = k
    return width


def chunk_width(waiting: Sequence[int], chunk: int) -> int:
    """The widest feed such that the rows' fed tokens stay within `chunk` in all (at least 1: every
    row is fed a token). For a runtime whose passes pack out padding, where a row's feed costs
    its own tokens whatever the others' widths."""
    low, high = 1, max(waiting)
    while low < high:  # the fed tokens grow with the width: the widest within the chunk, by bisection
        mid = (low + high + 1) // 2
        if sum(min(n, mid) for n in waiting) <= chunk:
            low = mid
        else:
            high = mid - 1
    return low


def unprefilled(runtime: Runtime, device: str, rows: Sequence, heads) -> KVBatch:
    """`rows` as a batch of their own that has run nothing yet: its cache holds their shared heads
    (where they have one), the rest of each prompt waits to be fed, in chunks, by the batch's
    steps (`KVBatch.feed`), and no row has a token to choose until its whole prompt is fed."""
    group = KVBatch(device)
    group.cache, group.mask = stacked_heads(runtime, heads, device)
    if group.cache is None:
        group.cache = runtime.new_cache()
    group.rows = list(rows)
    group.pos = [n for _, n in heads]
    group.last = [list(row.prompt_ids[n:]) for row, (_, n) in zip(rows, heads)]
    group.drafted, group.step_columns = [[] for _ in rows], [0] * len(rows)
    return group


def prefill(runtime: Runtime, device: str, rows: Sequence, heads) -> tuple[KVBatch, torch.Tensor]:
    """Prefill `rows` in one pass (`extend`); returns them as a batch and each row's last hidden state."""
    group = KVBatch(device)
    group.cache, group.mask, last = extend(runtime, device, [row.prompt_ids for row in rows], heads)
    group.rows = list(rows)
    group.pos, group.last = [len(row.prompt_ids) for row in rows], [[0]] * len(rows)
    for row in rows:
        row.prompt_fed = True
    group.drafted, group.step_columns = [[] for _ in rows], [0] * len(rows)
    return group, last
