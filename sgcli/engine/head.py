"""Logits for the rows and token ids that need them, projected from the model's hidden states.

Why: the output projection (hidden state -> one logit per vocabulary entry) is a fifth of the
work of a small model (SmolLM2-135M: 28M of its 135M weights), yet a constrained row often needs
few logits or none: where the grammar allows one token there is nothing to choose, and where it
allows a handful (digits, `true`/`false`, the spellings of a key) only theirs matter. Running
the model without its projection also lets a batched prefill pick each row's last position.

`OutputHead.of` builds one only where it reproduces the model's own logits, checked on a probe
input the first time (soft-capped and scaled logits are read from the config; any other
difference and it returns None, and callers use the model's own forward).
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
    """The model's body (`hidden`) and its output projection (`logits`, `logits_for`), apart."""

    def __init__(self, model):
        config = model.config
        self.body = model.base_model
        self.projection = model.get_output_embeddings()
        self.scale = getattr(config, "logit_scale", None)  # Cohere multiplies
        self.divisor = getattr(config, "logits_scaling", None)  # Granite divides
        self.softcap = getattr(config, "final_logit_softcapping", None)  # Gemma 2 and 3
        # rows can be gathered from the projection's weight where it is held (not offloaded by accelerate)
        self.can_gather = self.projection.weight.device.type != "meta"

    @classmethod
    def of(cls, model) -> OutputHead | None:
        """The head of `model`, or None where projecting its hidden states does not give its logits."""
        cached = model.__dict__.get("_sgcli_output_head", False)
        if cached is not False:
            return cached
        body, projection = getattr(model, "base_model", model), getattr(model, "get_output_embeddings", None)
        head = cls(model) if body is not model and projection is not None and projection() is not None else None
        if head is not None and not head._matches(model):
            head = None
        model.__dict__["_sgcli_output_head"] = head
        return head

    def _matches(self, model) -> bool:
        device = next(model.parameters()).device
        ids = torch.arange(3, device=device)[None] % model.config.vocab_size
        with torch.inference_mode():
            expected = model(input_ids=ids, use_cache=False).logits[0].float()
            got = self.logits(self.body(input_ids=ids, use_cache=False).last_hidden_state[0])
        return got.shape == expected.shape and torch.allclose(got, expected, rtol=1e-3, atol=1e-3)

    def hidden(self, **forward) -> tuple[torch.Tensor, object]:
        """The body's last hidden states [rows, positions, width] and the output with its cache."""
        out = self.body(**forward)
        return out.last_hidden_state, out

    def _finish(self, logits: torch.Tensor) -> torch.Tensor:
        if self.scale is not None:
            logits = logits * self.scale
        if self.divisor is not None:
            logits = logits / self.divisor
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits.float()

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
