"""Logits for the rows and token ids that need them, projected from the model's hidden states.

Why: the output projection (hidden state -> one logit per vocabulary entry) is a fifth of the
work of a small model (SmolLM2-135M: 28M of its 135M weights), yet a constrained row often needs
few logits or none: where the grammar allows one token there is nothing to choose, and where it
allows a handful (digits, `true`/`false`, the spellings of a key) only theirs matter. Running
the model without its projection also lets a batched prefill pick each row's last position.

Each runtime says whether its model has such a head (`Runtime.head`): the native forward's logits
are its head's by construction; a transformers model's head is checked once on a probe input
(soft-capped and scaled logits read from its config; any other difference and there is none, and
callers use the model's own logits).
"""

from __future__ import annotations

import torch

NARROW_FRACTION = 8  # on a CPU, a row whose grammar allows at most vocab/8 tokens gets logits for those only


def narrow_limit(vocab_width: int, device) -> int:
    """Up to how many allowed ids a row's logits are computed for those ids alone. On a CPU the
    projection is compute-bound and a few rows of it are cheap to gather; on an accelerator the
    whole projection is one fast kernel, and gathering rows per sequence would cost more launches
    and host copies than it saves, so there only a single allowed token skips it."""
    return vocab_width // NARROW_FRACTION if torch.device(device).type == "cpu" else 0


class OutputHead:
    """The model's output projection (`logits`, `logits_for`), apart from its body: a runtime
    (`sgcli.engine.runtime`) runs the body and hands its hidden states here."""

    def __init__(self, projection, *, scale: float | None = None, divisor: float | None = None, softcap=None):
        self.projection = projection
        self.scale = scale  # logits multiplied by it (Cohere)
        self.divisor = divisor  # logits divided by it (Granite)
        self.softcap = softcap  # logits soft-capped: tanh(x / cap) * cap (Gemma 2 and 3)
        # rows can be gathered from the projection's weight where it is held (not offloaded by accelerate)
        self.can_gather = self.projection.weight.device.type != "meta"

    def _finish(self, logits: torch.Tensor) -> torch.Tensor:
        """The projection's fresh output as float logits: widened first, then scaled and capped in
        place. In float32 these are transformers' own operations in its order; in bfloat16 they round
        once instead of after each step, and run 2.8x faster (every bfloat16 elementwise op converts
        on its own: 9.8 against 3.5 ms for 16 of Gemma's 256k-wide rows on an AMX Xeon)."""
        logits = logits.float()
        if self.scale is not None:
            logits.mul_(self.scale)
        if self.divisor is not None:
            logits.div_(self.divisor)
        if self.softcap is not None:
            logits.div_(self.softcap).tanh_().mul_(self.softcap)
        return logits

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float logits over the whole vocabulary for hidden states [..., width]."""
        return self._finish(self.projection(hidden))

    def logits_for(self, hidden: torch.Tensor, ids: torch.Tensor, vocab_width: int) -> torch.Tensor:
        """A row of `vocab_width` float logits for one hidden state [width], computed for `ids` only
        (-inf elsewhere: those tokens are masked out anyway)."""
        weight = self.projection.weight.index_select(0, ids.to(self.projection.weight.device))
        values = weight @ hidden.to(weight.device)
        if self.projection.bias is not None:
            values = values + self.projection.bias.index_select(0, ids.to(values.device))
        row = torch.full((vocab_width,), float("-inf"), device=hidden.device)
        row[ids] = self._finish(values).to(hidden.device)
        return row


def row_logits(head: OutputHead, hidden: torch.Tensor, allowed, vocab_width: int) -> torch.Tensor | None:
    """The logits one position needs under its grammar mask (`sequence.Allowed`): none where one
    token is allowed, the allowed ids' where they were listed (few), else the whole row."""
    if allowed.count == 1:
        return None
    if allowed.ids is not None and head.can_gather:
        return head.logits_for(hidden, torch.from_numpy(allowed.ids).to(hidden.device), vocab_width)
    return head.logits(hidden)
