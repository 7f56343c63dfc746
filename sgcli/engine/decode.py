"""The decode loop: logits -> mask -> sample -> accept, as a generator of events.

One sequence, KV-cached. The loop yields a `TokenEvent` for every token that adds
visible text (held back while it could still be the start of a stop string) and ends
with one `Finished` that says why it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from sgcli.backends.base import Compiled, new_bitmask
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
) -> Iterator[TokenEvent | Finished]:
    """Decode up to `max_tokens`; stop tokens are masked out until `min_tokens` are generated.

    With `think_end` (reasoning models), the model first thinks freely; the constraint
    applies from the end-of-thinking marker on. Text after the marker inside the same
    token was not constrained, so it stays in `reasoning`, never in the output.
    """
    model = lm.model
    vocab = compiled.vocab
    stop_ids = set(vocab.stop_ids)
    matcher = compiled.matcher()
    bitmask = new_bitmask(len(vocab))
    masker = Masker(lm.logits_width, lm.device)
    detok = IncrementalDetokenizer(vocab)
    generator = None
    if params.temperature > 0:
        generator = torch.Generator(device=lm.device)
        generator.manual_seed(params.seed if params.seed is not None else int(time.time_ns() % 2**31))

    text, emitted = "", 0
    thinking, reasoning = think_end is not None, ""
    think_detok = IncrementalDetokenizer(vocab)
    ids: list[int] = []
    mask_s: list[float] = []
    first_token_s = None
    reason, error = "length", None
    start = time.perf_counter()
    past = None
    cache_kw = cache_keyword(model)
    inputs = torch.tensor([prompt_ids], device=lm.device)
    with torch.inference_mode():
        while len(ids) < max_tokens:
            out = model(input_ids=inputs, use_cache=True, **{cache_kw: past})
            past = getattr(out, cache_kw)
            logits = out.logits[0, -1].float()
            t = time.perf_counter()
            if thinking:
                bitmask.fill(-1)
            else:
                matcher.fill_mask(bitmask)
            if len(ids) < min_tokens:
                _clear_bits(bitmask, stop_ids)
            any_allowed = masker.apply(logits, bitmask)
            mask_s.append(time.perf_counter() - t)
            if not any_allowed:
                reason, error = "error", matcher.error or "the grammar allows no next token"
                break
            token = sample(logits, params, generator)
            if first_token_s is None:
                first_token_s = time.perf_counter() - start
            if thinking:
                if token in stop_ids:
                    reason, error = "stop", f"the model stopped before the end-of-thinking marker {think_end!r}"
                    break
                ids.append(token)
                piece = think_detok.feed(token)
                reasoning += piece
                yield TokenEvent(token, piece, phase="reasoning")
                if think_end in reasoning:
                    thinking = False
                    head, _, tail = reasoning.partition(think_end)
                    reasoning = head + (think_end + tail if tail.strip() else "")
                inputs = torch.tensor([[token]], device=lm.device)
                continue
            if not matcher.accept(token):
                reason, error = "error", matcher.error or f"backend rejected token {token} that its own mask allowed"
                break
            if token in stop_ids:
                reason = "stop"
                break
            ids.append(token)
            text += detok.feed(token)
            hit = next((s for s in stop if s in text), None)
            if hit is not None:
                text = text[: text.index(hit)]
                reason = "stop"
                break
            visible = len(text) - _held_back(text, stop)
            if visible > emitted:
                yield TokenEvent(token, text[emitted:visible])
                emitted = visible
            else:
                yield TokenEvent(token, "")
            if matcher.is_terminated():
                reason = "stop"
                break
            inputs = torch.tensor([[token]], device=lm.device)
    text += detok.flush() if reason != "stop" or not stop else ""
    if len(text) > emitted:
        yield TokenEvent(ids[-1] if ids else -1, text[emitted:])
    yield Finished(
        reason,
        text,
        ids,
        len(prompt_ids),
        first_token_s,
        time.perf_counter() - start,
        mask_s,
        grammar_complete=not thinking and (matcher.can_stop() or matcher.is_terminated()),
        error=error,
        reasoning=reasoning if think_end is not None else None,
    )
