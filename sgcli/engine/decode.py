"""The decode loop: logits -> mask -> sample -> accept, as a generator of events.

One sequence, KV-cached; prefill computes logits for the last position only. Text the
grammar forces is appended in one forward pass (jump-forward, see `sgcli.engine.forced`).
The loop yields a `TokenEvent` for every token that adds visible text (held back while it
could still be the start of a stop string) and ends with one `Finished` that says why it
stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from sgcli.backends.base import Compiled, bitmask_words
from sgcli.engine.forced import draft_tokens, encode_bytes
from sgcli.engine.loader import LoadedModel
from sgcli.engine.sampling import Masker, SamplingParams, sample
from sgcli.tokenizers.vocab import IncrementalDetokenizer


@dataclass
class TokenEvent:
    token_id: int
    text: str  # newly visible text (may be empty)
    phase: str = "output"  # "reasoning" while a reasoning model thinks freely, then "output"


@dataclass
class Finished:
    finish_reason: str  # "stop" | "length" | "error"
    output: str
    token_ids: list[int]
    prompt_tokens: int
    first_token_s: float | None
    decode_s: float
    mask_s: list[float] = field(default_factory=list)  # per generated token
    grammar_complete: bool = False
    error: str | None = None
    reasoning: str | None = None  # free text before the end-of-thinking marker (reasoning mode)
    forced_tokens: int = 0  # tokens appended by jump-forward that needed no forward pass of their own
    forward_passes: int = 0  # model calls, the prefill included
    think_forced: bool = False  # the thinking budget ran out and the end-of-thinking marker was forced
    first_token_at: float | None = None  # time.perf_counter() at the first token (start-to-first-token)

    @property
    def completion_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def tokens_per_s(self) -> float | None:
        """Decode speed after the first token (prefill excluded), or overall for one token."""
        n = self.completion_tokens
        if n == 0 or self.decode_s <= 0:
            return None
        after_first = self.decode_s - (self.first_token_s or 0.0)
        return (n - 1) / after_first if n > 1 and after_first > 0 else n / self.decode_s


def _held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing chars of `text` could still grow into a stop string."""
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                hold = max(hold, k)
                break
    return hold


def _clear_bits(bitmask: np.ndarray, ids) -> None:
    for i in ids:
        if i // 32 < bitmask.size:
            bitmask[i // 32] &= np.int32(~np.uint32(1 << (i % 32)).view(np.int32))


def cache_keyword(model) -> str:
    """transformers renamed `past_key_values` to `cache`; use whichever this version takes."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


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
) -> Iterator[TokenEvent | Finished]:
    """Decode up to `max_tokens`; stop tokens are masked out until `min_tokens` are generated.

    With `think_end` (reasoning models), the model first thinks freely; the constraint
    applies from the end-of-thinking marker on. Text after the marker inside the same
    token was not constrained, so it stays in `reasoning`, never in the output. After
    `think_budget` thinking tokens the marker is forced.

    With `jump_forward` (and a backend that reports forced bytes), text the grammar forces
    is appended in one forward pass and checked position by position against what the
    model samples there (see `sgcli.engine.forced`): the output is the plain loop's.
    """
    run = _Run(lm, compiled, params, max_tokens, tuple(stop), min_tokens, think_end, think_budget)
    run.drafting = jump_forward and _backend_jumps(compiled)
    yield from run.events(prompt_ids)


def _backend_jumps(compiled: Compiled) -> bool:
    from sgcli.backends import get_backend

    return get_backend(compiled.backend).capabilities.jump_forward


class _Run:
    """The state of one decode; `events` drives it. Split out so each step stays small."""

    def __init__(self, lm, compiled, params, max_tokens, stop, min_tokens, think_end, think_budget):
        self.lm, self.model, self.vocab = lm, lm.model, compiled.vocab
        self.params, self.max_tokens, self.stop, self.min_tokens = params, max_tokens, stop, min_tokens
        self.stop_ids = set(self.vocab.stop_ids)
        self.matcher = compiled.matcher()
        self.masker = Masker(lm.logits_width, lm.device, bitmask_words(len(self.vocab)))
        self.bitmask = self.masker.buffer
        self.detok, self.think_detok = IncrementalDetokenizer(self.vocab), IncrementalDetokenizer(self.vocab)
        self.generator = None
        if params.temperature > 0:
            self.generator = torch.Generator(device=lm.device)
            self.generator.manual_seed(params.seed if params.seed is not None else int(time.time_ns() % 2**31))
        self.think_end, self.think_budget = think_end, think_budget
        self.thinking, self.reasoning, self.think_tokens, self.think_forced = think_end is not None, "", 0, False
        self.text, self.emitted, self.ids, self.mask_s = "", 0, [], []
        self.first_token_s, self.reason, self.error, self.done = None, "length", None, False
        self.drafting, self.forced, self.passes = False, 0, 0
        self.dropped = False  # the last sampled token is not fed to the model (a stop token while thinking)
        self.cache_kw = cache_keyword(self.model)

    def events(self, prompt_ids: list[int]) -> Iterator[TokenEvent | Finished]:
        self.start = time.perf_counter()
        past = self._new_cache()
        marker = yield from self._end_thinking_if_over_budget()  # a budget of 0: no thinking at all
        pending, draft = list(prompt_ids) + marker, self._draft(marker[-1] if marker else None)
        with torch.inference_mode():
            while not self.done and len(self.ids) < self.max_tokens:
                feed = torch.tensor([pending + draft], device=self.lm.device)
                out = self.model(input_ids=feed, use_cache=True, logits_to_keep=len(draft) + 1, **{self.cache_kw: past})
                past, rows, self.passes = getattr(out, self.cache_kw), out.logits[0], self.passes + 1
                for i in range(len(draft) + 1):
                    token = self._sample(rows[i].float())
                    if token is None:
                        break
                    yield from self._take(token)
                    agreed = i < len(draft) and token == draft[i]
                    self.forced += agreed
                    if self.done or len(self.ids) >= self.max_tokens:
                        break
                    if agreed:
                        continue
                    if i < len(draft):
                        past.crop(i - len(draft))  # drop the draft tokens the model did not write (negative: how many)
                    pending = [] if self.dropped else [token]
                    pending += yield from self._end_thinking_if_over_budget()
                    self.dropped = False
                    draft = self._draft(pending[-1])
                    break
        yield from self._flush()
        yield self._finished(len(prompt_ids))

    def _sample(self, logits: torch.Tensor) -> int | None:
        """The next token from one row of logits under the grammar's mask; None (and done) if none is allowed."""
        t = time.perf_counter()
        if self.thinking:
            self.bitmask.fill(-1)
        else:
            self.matcher.fill_mask(self.bitmask)
        if len(self.ids) < self.min_tokens:
            _clear_bits(self.bitmask, self.stop_ids)
        any_allowed = self.masker.apply(logits, self.bitmask)
        self.mask_s.append(time.perf_counter() - t)
        if not any_allowed:
            self._end("error", self.matcher.error or "the grammar allows no next token")
            return None
        token = sample(logits, self.params, self.generator)
        if self.first_token_s is None:
            self.first_token_s = time.perf_counter() - self.start
        return token

    def _draft(self, previous: int | None) -> list[int]:
        """Forced tokens to append after `previous` (none while thinking or without jump-forward)."""
        if not self.drafting or self.thinking or self.matcher.is_terminated():
            return []
        room = self.max_tokens - len(self.ids) - 1
        return draft_tokens(self.vocab, previous, self.matcher.jump_forward(), room)

    def _end(self, reason: str, error: str | None = None) -> None:
        self.reason, self.error, self.done = reason, error, True

    def _take(self, token: int) -> Iterator[TokenEvent]:
        """Record one sampled token: matcher, text, stop conditions, and the events to stream."""
        if self.thinking:
            yield from self._take_thinking(token)
            return
        if not self.matcher.accept(token):
            self._end("error", self.matcher.error or f"backend rejected token {token} that its own mask allowed")
            return
        if token in self.stop_ids:
            self._end("stop")
            return
        self.ids.append(token)
        self.text += self.detok.feed(token)
        hit = next((s for s in self.stop if s in self.text), None)
        if hit is not None:
            self.text = self.text[: self.text.index(hit)]
            self._end("stop")
            return
        visible = len(self.text) - _held_back(self.text, self.stop)
        yield TokenEvent(token, self.text[self.emitted : visible] if visible > self.emitted else "")
        self.emitted = max(self.emitted, visible)
        if self.matcher.is_terminated():
            self._end("stop")

    def _take_thinking(self, token: int, forced: bool = False) -> Iterator[TokenEvent]:
        if token in self.stop_ids and not forced:
            if self.think_budget is None:
                self._end("stop", f"the model stopped before the end-of-thinking marker {self.think_end!r}")
            else:  # with a budget, stopping early ends the thinking: the marker replaces the stop token
                self.dropped = True
            return
        self.ids.append(token)
        self.think_tokens += 1
        piece = self.think_detok.feed(token)
        self.reasoning += piece
        yield TokenEvent(token, piece, phase="reasoning")
        if self.think_end in self.reasoning:
            self.thinking = False
            head, _, tail = self.reasoning.partition(self.think_end)
            self.reasoning = head + (self.think_end + tail if tail.strip() else "")

    def _end_thinking_if_over_budget(self) -> Iterator[TokenEvent]:
        """Past the thinking budget, or where the model stopped while thinking under one, force the
        end-of-thinking marker (as SGLang's and vLLM's reasoning budgets do); returns its tokens,
        recorded and streamed, for the next forward pass to read."""
        if (
            not self.thinking
            or self.think_budget is None
            or (self.think_tokens < self.think_budget and not self.dropped)
        ):
            return []
        marker = encode_bytes(self.vocab, self.think_end.encode("utf-8"))
        for token in marker:
            yield from self._take_thinking(token, forced=True)
        self.thinking, self.think_forced = False, True
        return marker

    def _new_cache(self):
        """An empty KV cache; jump-forward needs one it can crop (rejected draft tokens are removed)."""
        from transformers.cache_utils import DynamicCache

        try:
            cache = DynamicCache(config=self.model.config)
        except (TypeError, ValueError, AttributeError):
            cache = None  # the model builds its own; drafts then stay off
        self.drafting = self.drafting and cache is not None and cache.is_croppable
        return cache

    def _flush(self) -> Iterator[TokenEvent]:
        self.text += self.detok.flush() if self.reason != "stop" or not self.stop else ""
        if len(self.text) > self.emitted:
            yield TokenEvent(self.ids[-1] if self.ids else -1, self.text[self.emitted :])

    def _finished(self, prompt_tokens: int) -> Finished:
        return Finished(
            self.reason,
            self.text,
            self.ids,
            prompt_tokens,
            self.first_token_s,
            time.perf_counter() - self.start,
            self.mask_s,
            grammar_complete=not self.thinking and (self.matcher.can_stop() or self.matcher.is_terminated()),
            error=self.error,
            reasoning=self.reasoning if self.think_end is not None else None,
            forced_tokens=self.forced,
            forward_passes=self.passes,
            first_token_at=None if self.first_token_s is None else self.start + self.first_token_s,
            think_forced=self.think_forced,
        )
