"""The decode loop: logits -> mask -> sample -> accept, as a generator of events.

One sequence, KV-cached; prefill computes logits for the last position only, and each position's
logits are projected after its grammar mask, only as far as the mask leaves a choice
(`sgcli.engine.head`). Text the
grammar forces is appended in one forward pass (jump-forward, see `sgcli.engine.forced`).
The loop yields a `TokenEvent` for every token that adds visible text (held back while it
could still be the start of a stop string) and ends with one `Finished` that says why it
stopped.

Backtracking (issue 28; the rules and bounds are `sgcli.engine.sequence`'s): where sgcli's schema
checker leaves no token allowed, the last token is undone, its KV cache column cropped, and its
position's logits recomputed by feeding the token before it again (one forward pass per undone
token), then sampled with the undone token banned there. Only for a checked grammar
(`Compiled.may_dead_end`: sgcli's schema checker, or its guard against a repeated key; bare
backends' masks do not dead-end) on a runtime whose cache crops; without one, a dead end ends the
sequence as before, its error saying why nothing was undone. While
backtracking is on, the stream holds back the text of the last `BACKTRACK_WINDOW` tokens, so
text once shown is never taken back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from sgcli.backends import get_backend
from sgcli.backends.base import Compiled, bitmask_words
from sgcli.engine import threads
from sgcli.engine.forced import Spellings, draft_tokens
from sgcli.engine.head import narrow_limit, row_logits
from sgcli.engine.loader import LoadedModel
from sgcli.engine.sampling import Masker, SamplingParams
from sgcli.engine.sequence import Finished, SequenceState, TokenEvent


def decode(
    lm: LoadedModel,
    prompt_ids: list[int],
    compiled: Compiled,
    *,
    params: SamplingParams,
    max_tokens: int,
    stop: Sequence[str] = (),
    min_tokens: int = 0,
    think_end: str | None = None,
    jump_forward: bool = True,
    think_budget: int | None = None,
    repetition_guard: bool = True,
) -> Iterator[TokenEvent | Finished]:
    """Decode up to `max_tokens`; stop tokens are masked out until `min_tokens` are generated.

    With `think_end` (reasoning models), the model first thinks freely; the constraint
    applies from the end-of-thinking marker on. Text after the marker inside the same
    token was not constrained, so it stays in `reasoning`, never in the output. After
    `think_budget` thinking tokens the marker is forced.

    With `jump_forward` (and a backend that reports forced bytes), text the grammar forces
    is appended in one forward pass and checked position by position against what the
    model samples there (see `sgcli.engine.forced`): the output is the plain loop's.
    With `repetition_guard`, an output stuck repeating one span ends early (`sgcli.engine.repetition`).
    """
    masker = Masker(lm.logits_width, lm.device, bitmask_words(len(compiled.vocab)))
    no_backtrack = why_no_backtrack(lm, compiled)  # None: backtrack; "": a bare grammar's dead ends end it
    seq = SequenceState(
        compiled,
        params,
        max_tokens=max_tokens,
        min_tokens=min_tokens,
        stop=stop,
        think_end=think_end,
        think_budget=think_budget,
        prompt_ids=prompt_ids,
        device=lm.device,
        bitmask=masker.buffer,
        repetition_guard=repetition_guard,
        backtrack=no_backtrack is None,
        no_backtrack=no_backtrack or None,
    )
    yield from _Run(lm, seq, masker, jump_forward and backend_jumps(compiled)).events(prompt_ids)


def why_no_backtrack(lm: LoadedModel, compiled: Compiled) -> str | None:
    """Why a dead end of this decode cannot be backtracked out of (None: it can; "": a grammar without
    sgcli's schema checker, whose backend's masks do not dead-end, so there is nothing to explain)."""
    if not compiled.may_dead_end:
        return ""
    if not lm.runtime.supports.crop:
        return "this model's KV cache cannot be cropped"
    return None


def backend_jumps(compiled: Compiled) -> bool:
    """Whether the compiled grammar's backend reports forced text (what jump-forward drafts spell)."""
    return get_backend(compiled.backend).capabilities.jump_forward


class _Run:
    """One decode's forward passes and jump-forward drafts; the per-token rules are its
    `SequenceState`'s (shared with batch rows). Split out so each step stays small."""

    def __init__(self, lm: LoadedModel, seq: SequenceState, masker: Masker, drafting: bool):
        self.lm, self.runtime, self.seq, self.masker = lm, lm.runtime, seq, masker
        self.drafting, self.passes = drafting, 0
        self.head = self.runtime.head()  # None: the model's own logits, for every kept position
        self.narrow = narrow_limit(masker.width, lm.device)
        self.spellings = Spellings(seq.vocab)  # how this model spells forced text, from its turned-down drafts

    def events(self, prompt_ids: list[int]) -> Iterator[TokenEvent | Finished]:
        seq = self.seq
        past = self._new_cache()
        marker, events = seq.force_think_end()  # a budget of 0: no thinking at all
        yield from events
        pending, draft = list(prompt_ids) + marker, self._draft(marker[-1] if marker else None)
        with torch.inference_mode():
            while not seq.done and len(seq.ids) < seq.max_tokens:
                feed = torch.tensor([pending + draft], device=self.lm.device)
                past, logits_at = self._forward(feed, past, len(draft) + 1)
                self.passes += 1
                for i in range(len(draft) + 1):
                    allowed = seq.allowed(self.narrow)
                    token = None if allowed is None else seq.choose(allowed, logits_at(i, allowed), self.masker)
                    if token is None:
                        if seq.dead_end:
                            pending, draft = self._backtrack(past, prompt_ids), []
                        break
                    event = seq.take(token)
                    if event is not None:
                        yield event
                    agreed = i < len(draft) and token == draft[i]
                    seq.forced += agreed
                    if seq.done:
                        break
                    if agreed:
                        continue
                    if i < len(draft):
                        self.spellings.turned_down(draft[i], token)
                        past.crop(i - len(draft))  # drop the draft tokens the model did not write (negative: how many)
                    pending = [] if seq.dropped else [token]
                    marker, events = seq.force_think_end()
                    yield from events
                    pending += marker
                    seq.dropped = False
                    draft = self._draft(pending[-1])
                    break
        last = seq.flush()
        if last is not None:
            yield last
        yield seq.finished(len(prompt_ids), self.passes)

    def _backtrack(self, past, prompt_ids: list[int]) -> list[int]:
        """Undo the last token at a dead end; crop the cache to the tokens before it, less the last
        one, which is returned to be fed again: its pass gives the undone position's logits."""
        seq = self.seq
        seq.backtrack()
        context = len(prompt_ids) + len(seq.ids)  # every kept token was fed (a dropped one is not kept)
        past.crop(context - 1 - past.get_seq_length())  # negative: how many columns to drop (transformers' rule)
        return [seq.ids[-1] if seq.ids else prompt_ids[-1]]

    def _forward(self, feed: torch.Tensor, past, keep: int):
        """One forward pass over `feed`; (the cache, a function giving the logits position i of the
        last `keep` needs under its mask). With an `OutputHead`, only those logits are projected."""
        threads.tick()  # between two steps: torch's threads follow other work that started meanwhile
        if self.head is None:
            logits, past = self.runtime.logits(feed, past, keep)
            return past, lambda i, allowed: logits[0, i]
        hidden, past = self.runtime.hidden(feed, past)
        hidden = hidden[0, -keep:]
        width = self.masker.width
        return past, lambda i, allowed: row_logits(self.head, hidden[i], allowed, width)

    def _draft(self, previous: int | None) -> list[int]:
        """Forced tokens to append after `previous` (none while thinking or without jump-forward)."""
        seq = self.seq
        if not self.drafting or seq.thinking or seq.matcher.is_terminated():
            return []
        room = seq.max_tokens - len(seq.ids) - 1
        return draft_tokens(seq.vocab, previous, seq.matcher.jump_forward(), room, self.spellings)

    def _new_cache(self):
        """An empty KV cache; jump-forward needs one it can crop (rejected draft tokens are removed)."""
        cache = self.runtime.new_cache()  # None: the model builds its own; drafts then stay off
        self.drafting = self.drafting and cache is not None and self.runtime.supports.crop
        return cache
