"""Ragged passes: rows of different lengths cost what their own tokens cost, not the longest row's.

Why: a batched step feeds every row into one [rows, width] block, the shorter feeds padded on the
right (a row still prefilling its prompt beside rows taking one token, forced tokens, drafts).
On a CPU a matrix product costs as much for a padding position as for a real one. So where a pass
holds enough padding, the native forward (`sgcli.engine.llama`) runs every position-wise part of
a layer (norms, projections, the MLP) on the real positions only, packed one after another
([tokens, width]), and unpacks them into the padded block just for attention, which it computes
per run of neighbouring rows of like width (`Ragged.segments`), so a row taking one token does not
attend over a long row's padding. Padding positions leave zeros in the KV cache; they are masked
as before. A pass may hold several parts (`PassInput`), each with its own rows and KV cache: a
batch's decode step beside the prompt chunks of the rows joining it, the weights read once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Pack a pass when at least this share of its positions is padding: below it, the gathers and
# scatters (a few per layer) cost about what the padding does.
PACK_PADDING_SHARE = 0.125
# What one more attention call costs, in query positions of attention work: runs of rows are split
# where the padding they would attend over costs more than this.
SEGMENT_CALL_POSITIONS = 4
MAX_LOOKBACK = 32  # groups of like-width rows a run may span, bounding the split's cost on large batches


@dataclass
class PassInput:
    """One part of a pass over several (`Runtime.hidden_parts`): rows that share a KV cache, their fed
    ids [rows, length], padding mask over every cache column, positions."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor | None = None
    position_ids: torch.Tensor | None = None
    cache: object | None = None  # the part's KV cache (sgcli.engine.kv.KVCache), None: nothing cached


@dataclass
class Ragged:
    """Where a padded [rows, length] block's real positions are: `index` into its flattened
    positions (row-major), and the runs of rows attended together, (first row, end row, width)."""

    rows: int
    length: int
    index: torch.Tensor
    segments: list[tuple[int, int, int]]

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """[rows, length, ...] -> [real positions, ...]."""
        return x.reshape(self.rows * self.length, *x.shape[2:]).index_select(0, self.index)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """[real positions, ...] -> [rows, length, ...], zeros at the padding."""
        out = x.new_zeros((self.rows * self.length, *x.shape[1:]))
        out.index_copy_(0, self.index, x)
        return out.view(self.rows, self.length, *x.shape[1:])


def plan(fed: torch.Tensor | None) -> Ragged | None:
    """The packing of a pass whose fed positions are `fed` [rows, length] (1 real, 0 padding; the
    last `length` columns of the attention mask), or None where it is not worth it (no mask, a
    single position per row, too little padding)."""
    if fed is None or fed.shape[1] < 2:
        return None
    real = fed.bool()
    rows, length = real.shape
    count = int(real.sum())
    if count == 0 or rows * length - count < PACK_PADDING_SHARE * rows * length:
        return None
    # each row's width: up to its last real position (a row's feed is its first positions)
    columns = torch.arange(1, length + 1, device=real.device)
    widths = (real * columns).amax(dim=1).clamp(min=1).tolist()
    index = real.reshape(-1).nonzero().squeeze(1)
    return Ragged(rows, length, index, segments(widths))


def segments(widths: list[int], call: int = SEGMENT_CALL_POSITIONS) -> list[tuple[int, int, int]]:
    """Split rows into runs of neighbours (the cache keeps rows in order, so a run is a view, not a
    copy) minimising the attention work: a run costs its rows x its widest row, plus `call` for
    the call itself. (first row, end row, width) per run. Exact, by dynamic programming over the
    groups of neighbours of equal width (some cheapest split never cuts one: its rows can all join
    whichever side's widest row is narrower), looking back at most MAX_LOOKBACK groups."""
    groups: list[list[int]] = []  # [first row, end row, width]
    for row, width in enumerate(widths):
        if groups and groups[-1][2] == width:
            groups[-1][1] = row + 1
        else:
            groups.append([row, row + 1, width])
    n = len(groups)
    best = [0] + [float("inf")] * n
    cut = [0] * (n + 1)
    for end in range(1, n + 1):
        width = 0
        for start in range(end - 1, max(-1, end - 1 - MAX_LOOKBACK), -1):
            width = max(width, groups[start][2])
            cost = best[start] + (groups[end - 1][1] - groups[start][0]) * width + call
            if cost < best[end]:
                best[end], cut[end] = cost, start
    runs = []
    end = n
    while end:
        start = cut[end]
        runs.append((groups[start][0], groups[end - 1][1], max(g[2] for g in groups[start:end])))
        end = start
    return runs[::-1]
