"""The per-token rules of one generated sequence, in one place.

Both the single-stream loop (`sgcli.engine.decode`) and each row of a batch
(`sgcli.engine.batching`) hold a `SequenceState`: it fills the grammar's mask and says what it
allows (everything while a reasoning model thinks) before any logits are computed, so the loops
project only the logits that leave a choice; it samples, and takes the token: the
matcher, stop tokens and stop strings, the token budget, the end-of-thinking marker and its
budget, the text that may be shown (held back while it could still become a stop string),
the repetition guard (`sgcli.engine.repetition`), and the `Finished` record that says why the sequence ended. The loops
only decide which logits a sequence sees and when.

Backtracking (issue 28). sgcli's schema checker (`sgcli.backends.schema_checker`) refuses tokens
that would complete a value the schema rules out; where its refusals leave no token at all (an
array under `uniqueItems` whose remaining `enum` values are all used, a string the model wrote
past what its `pattern` can still match), the sequence is at a dead end. A sequence made with
`backtrack=True` then does not end: `allowed` returns None with `dead_end` set, and the loop calls
`backtrack`, which undoes the last output token (the matcher's `rollback(1)`, its id, its text and
the detokenizer's state) and bans that token at its position; the loop crops the KV cache and
recomputes that position's logits, and the position is sampled again without the banned ids.
Where that position dead-ends too (every token it allows is banned), the token before it is
undone as well; the bans of positions after the one being redone are forgotten. Bounded:

- at most MAX_BACKTRACKS tokens are undone per sequence, never a token of the reasoning or
  before the output's start, and never one whose text was already streamed;
- the streaming rule: while backtracking is on, the text of the last BACKTRACK_WINDOW output
  tokens is held back (as a possible stop string is), so backtracking within that window never
  retracts text a user saw; going further back is allowed only over text not yet shown (the
  same rule whether or not anyone streams, so a streamed run and a recorded one agree).

Beyond the bound, the sequence ends with finish_reason "error" and an error that says that
backtracking gave up, why, and where (the checker's refusal names the JSON pointer). A sequence
made without backtracking says why in its error (`no_backtrack`) when it dead-ends. The final
text is always exactly the kept tokens' text; `Finished.backtracks` counts the undone tokens.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from sgcli.backends.base import BITS_PER_WORD, Compiled, allow_every_token, new_bitmask, unpack_bits
from sgcli.engine.forced import encode_bytes
from sgcli.engine.repetition import find_repetition
from sgcli.engine.sampling import Masker, SamplingParams, sample
from sgcli.tokenizers.vocab import IncrementalDetokenizer

MAX_BACKTRACKS = 64  # tokens one sequence may undo at dead ends, in all (then it ends with an error)
BACKTRACK_WINDOW = 16  # while backtracking is on, the text of this many last output tokens is not streamed yet


@dataclass
class TokenEvent:
    token_id: int
    text: str  # newly visible text (may be empty)
    phase: str = "output"  # "reasoning" while a reasoning model thinks freely, then "output"


@dataclass
class Finished:
    finish_reason: str  # "stop" | "length" | "repetition" | "error"
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
    prompt_ended_thinking: bool = False  # the prompt already ended with the end-of-thinking marker
    first_token_at: float | None = None  # time.perf_counter() at the first token (start-to-first-token)
    backtracks: int = 0  # tokens undone at dead ends (see the module docstring)
    stop_string: str | None = None  # the --stop string that ended the output, cut before it

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


def held_back(text: str, stops: Sequence[str]) -> int:
    """How many trailing chars of `text` could still grow into a stop string."""
    hold = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                hold = max(hold, k)
                break
    return hold


@dataclass(frozen=True)
class Allowed:
    """What the grammar's mask allows at one position: how many ids, and which (where few)."""

    count: int
    ids: np.ndarray | None = None


def clear_bits(bitmask: np.ndarray, ids) -> None:
    for i in ids:
        word, bit = divmod(i, BITS_PER_WORD)
        if word < bitmask.size:
            bitmask[word] &= np.int32(~np.uint32(1 << bit).view(np.int32))


def seeded_generator(params: SamplingParams, device) -> torch.Generator | None:
    """A generator seeded per request (by `params.seed`, or the clock); None for greedy decoding."""
    if params.temperature <= 0:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(params.seed if params.seed is not None else int(time.time_ns() % 2**31))
    return generator


def ends_thinking(vocab, prompt_ids: Sequence[int], think_end: str) -> bool:
    """Whether the prompt already ends with the end-of-thinking marker (then whitespace at most): a
    template that closes the thinking block itself (`<think>\n\n</think>\n\n`) leaves the answer to the
    model, which a reasoning run must constrain from its first token (as vLLM's `is_reasoning_end`)."""
    tail = b"".join(vocab.tokens[i] for i in prompt_ids[-64:] if i < len(vocab.tokens))
    return tail.decode("utf-8", errors="replace").rstrip().endswith(think_end)


class SequenceState:
    """One sequence's decoding state; `allowed`, `choose` and `take` per position, `finished` at the end.

    `bitmask` is the buffer the matcher fills (the single loop passes its Masker's pinned
    one; batch rows get their own)."""

    def __init__(
        self,
        compiled: Compiled,
        params: SamplingParams,
        *,
        max_tokens: int,
        min_tokens: int = 0,
        stop: Sequence[str] = (),
        think_end: str | None = None,
        think_budget: int | None = None,
        prompt_ids: Sequence[int] = (),
        device="cpu",
        bitmask: np.ndarray | None = None,
        repetition_guard: bool = True,
        backtrack: bool = False,
        no_backtrack: str | None = None,
    ):
        self.vocab = compiled.vocab
        self.params, self.max_tokens, self.stop, self.min_tokens = params, max_tokens, tuple(stop), min_tokens
        self.stop_ids = set(self.vocab.stop_ids)
        self.matcher = compiled.matcher()
        self.bitmask = bitmask if bitmask is not None else new_bitmask(len(self.vocab))
        self.detok, self.think_detok = IncrementalDetokenizer(self.vocab), IncrementalDetokenizer(self.vocab)
        self.generator = seeded_generator(params, device)
        self.think_end, self.think_budget = think_end, think_budget
        self.thinking, self.reasoning, self.think_tokens, self.think_forced = think_end is not None, "", 0, False
        # a template that closed the thinking block itself (Qwen3's enable_thinking=false): constrain from the start
        self.prompt_ended_thinking = self.thinking and ends_thinking(self.vocab, prompt_ids, think_end)
        self.thinking = self.thinking and not self.prompt_ended_thinking
        self.text, self.emitted, self.ids, self.mask_s = "", 0, [], []
        self.first_token_s, self.reason, self.error, self.done = None, "length", None, False
        self.stop_string: str | None = None  # the --stop string that ended the output
        self.dropped = False  # the last sampled token is not fed to the model (a stop token while thinking)
        self.forced = 0  # jump-forward tokens the model agreed with (counted by the single loop)
        self.repetition_guard = repetition_guard
        self.chose = False  # the grammar left the last token a choice (a forced repetition is not the model's)
        # backtracking at dead ends (the module docstring); `no_backtrack`: why not, for the error
        # (None without backtracking: a dead end's error is the grammar's alone)
        self.backtrack_on, self.no_backtrack = backtrack, None if backtrack else no_backtrack
        self.backtracks, self.dead_end, self.refusal = 0, False, None  # refusal: the last dead end's error
        self.banned: dict[int, set[int]] = {}  # position (len(ids) there) -> ids undone there
        self.marks: list[tuple[int, tuple]] = []  # per output token: (len(text), detokenizer state) after it
        self._start_state = self.detok.state()
        self.start = time.perf_counter()

    def allowed(self, narrow: int = 0) -> Allowed | None:
        """Fill the grammar's mask for the next position and say what it allows: the ids themselves
        where there are at most `narrow` of them (or exactly one). None where nothing is: then the sequence
        is done, or at a `dead_end` for the loop to `backtrack` out of."""
        t = time.perf_counter()
        banned = self.banned.get(len(self.ids))
        if self.thinking:
            allow_every_token(self.bitmask, self.vocab)
        else:
            self.matcher.fill_mask(self.bitmask)
            if banned:
                clear_bits(self.bitmask, banned)
        if len(self.ids) < self.min_tokens:
            clear_bits(self.bitmask, self.stop_ids)
        bits = unpack_bits(self.bitmask, len(self.vocab))
        count = int(np.count_nonzero(bits))
        self.mask_s.append(time.perf_counter() - t)
        if not count:
            self._dead_end(bool(banned))
            return None
        return Allowed(count, np.flatnonzero(bits) if count <= max(narrow, 1) else None)

    def choose(self, allowed: Allowed, logits: torch.Tensor | None, masker: Masker) -> int | None:
        """Sample from `logits` under the mask `allowed` came from. Where one token is allowed it is
        taken without logits or sampling (the single loop and batch rows alike, so a seeded run
        draws the same random numbers in both)."""
        self.chose = allowed.count > 1
        if allowed.count == 1:
            token = int(allowed.ids[0])
        elif not masker.apply(logits, self.bitmask):  # ids past the model's logits were the only ones allowed
            self.end("error", self.matcher.error or "the grammar allows no next token")
            return None
        else:
            token = sample(logits, self.params, self.generator)
        if self.first_token_s is None:
            self.first_token_s = time.perf_counter() - self.start
        return token

    def end(self, reason: str, error: str | None = None) -> None:
        self.reason, self.error, self.done = reason, error, True

    def _dead_end(self, banned: bool) -> None:
        """No token is allowed here: set `dead_end` for the loop to `backtrack`, or end with the reason why not."""
        refusal = self.matcher.error
        if refusal:
            self.refusal = refusal
        if refusal or not banned:
            error = refusal or "the grammar allows no next token"
        else:  # say what made it go back
            error = "every token the grammar allows here was undone by backtracking" + (
                f" (the last dead end: {self.refusal})" if self.refusal else ""
            )
        if not self.backtrack_on and self.no_backtrack is None:  # a bare grammar's dead end: as it says
            self.end("error", error)
            return
        why_not = self._why_not_backtrack()
        if why_not is None:
            self.dead_end = True
            return
        pointer = getattr(self.matcher, "pointer", None)  # the schema checker knows where it is in the JSON
        where = f" (at {pointer or '/'}, output token {len(self.marks)})" if pointer is not None else ""
        self.end("error", f"{why_not}{where}: {error}")

    def _why_not_backtrack(self) -> str | None:
        """Why this dead end cannot be backtracked out of (None: it can)."""
        if not self.backtrack_on:
            return f"dead end, not backtracked ({self.no_backtrack})"
        if self.backtracks >= MAX_BACKTRACKS:
            return f"backtracking gave up after {self.backtracks} undone tokens (at most {MAX_BACKTRACKS} per sequence)"
        if self.thinking or not self.marks:
            return f"backtracking gave up after {self.backtracks} undone tokens: no output token is left to undo"
        if (self.marks[-2][0] if len(self.marks) > 1 else 0) < self.emitted:
            return (
                f"backtracking gave up after {self.backtracks} undone tokens: the text before here was already streamed"
            )
        return None

    def backtrack(self) -> int:
        """Undo the last output token at a dead end and ban it at its position; returns that position
        (len(ids) now). The loop then recomputes the position's logits (its KV cache cropped)."""
        assert self.dead_end and self.marks
        token = self.ids.pop()
        self.marks.pop()
        self.matcher.rollback(1)
        position = len(self.ids)
        for later in [p for p in self.banned if p > position]:
            del self.banned[later]
        self.banned.setdefault(position, set()).add(token)
        size, state = self.marks[-1] if self.marks else (0, self._start_state)
        self.text = self.text[:size]
        self.detok.restore(state)
        self.backtracks += 1
        self.dead_end = False
        return position

    def take(self, token: int) -> TokenEvent | None:
        """Record one sampled token (matcher, text, stop conditions, token budget); the event to stream, if any."""
        event = self._take_thinking(token) if self.thinking else self._take_output(token)
        if not self.done and len(self.ids) >= self.max_tokens:
            self.end("stop" if self.only_stop_follows() else "length")
        return event

    def only_stop_follows(self) -> bool:
        """Whether the output is complete and the grammar allows nothing but a stop token next: the
        budget's last token then finished the output rather than cut it off. Asked only there (it fills
        one more mask), the same question for every backend (some say `is_terminated` only once the stop
        token itself is accepted, others as soon as nothing else may follow)."""
        if self.thinking or not self.matcher.can_stop():
            return False
        bitmask = new_bitmask(len(self.vocab))
        self.matcher.fill_mask(bitmask)
        ids = np.flatnonzero(unpack_bits(bitmask, len(self.vocab)))
        return ids.size > 0 and self.stop_ids.issuperset(ids.tolist())

    def _take_output(self, token: int) -> TokenEvent | None:
        if token in self.stop_ids and self.matcher.error:  # llguidance in an error state allows only the end
            self.end("error", self.matcher.error)
            return None
        if not self.matcher.accept(token):
            self.end("error", self.matcher.error or f"backend rejected token {token} that its own mask allowed")
            return None
        if token in self.stop_ids:
            self.end("stop")
            return None
        self.ids.append(token)
        self.text += self.detok.feed(token)
        self.marks.append((len(self.text), self.detok.state()))
        hit = next((s for s in self.stop if s in self.text), None)
        if hit is not None:
            self.text, self.stop_string = self.text[: self.text.index(hit)], hit
            self.end("stop")
            return None
        visible = len(self.text) - held_back(self.text, self.stop)
        if self.backtrack_on:  # what backtracking could still undo is not shown yet
            back = len(self.marks) - BACKTRACK_WINDOW
            visible = min(visible, self.marks[back - 1][0] if back > 0 else 0)
        event = TokenEvent(token, self.text[self.emitted : visible] if visible > self.emitted else "")
        self.emitted = max(self.emitted, visible)
        if self.matcher.is_terminated():
            self.end("stop")
        elif self.repetition_guard and self.chose:
            repeated = find_repetition(self.text)
            if repeated is not None:
                self.end("repetition", repeated.message())
        return event

    def _take_thinking(self, token: int, forced: bool = False) -> TokenEvent | None:
        if token in self.stop_ids and not forced:
            if self.think_budget is None:
                self.end("stop", f"the model stopped before the end-of-thinking marker {self.think_end!r}")
            else:  # with a budget, stopping early ends the thinking: the marker replaces the stop token
                self.dropped = True
            return None
        self.ids.append(token)
        self.think_tokens += 1
        piece = self.think_detok.feed(token)
        self.reasoning += piece
        if self.think_end in self.reasoning:
            self.thinking = False
            head, _, tail = self.reasoning.partition(self.think_end)
            self.reasoning = head + (self.think_end + tail if tail.strip() else "")
        return TokenEvent(token, piece, phase="reasoning")

    def force_think_end(self) -> tuple[list[int], list[TokenEvent]]:
        """Past the thinking budget, or where the model stopped while thinking under one, force the
        end-of-thinking marker (as SGLang's and vLLM's reasoning budgets do): (its tokens, recorded,
        for the next forward pass to read; their events). Nothing otherwise."""
        if (
            not self.thinking
            or self.think_budget is None
            or (self.think_tokens < self.think_budget and not self.dropped)
        ):
            return [], []
        marker = encode_bytes(self.vocab, self.think_end.encode("utf-8"))
        events = [self._take_thinking(token, forced=True) for token in marker]
        self.thinking, self.think_forced = False, True
        if len(self.ids) >= self.max_tokens:
            self.end("length")
        return marker, events

    def flush(self) -> TokenEvent | None:
        """At the end: the detokenizer's pending text (unless a stop string cut the output) and
        whatever was held back, as one last event."""
        self.text += self.detok.flush() if self.reason != "stop" or not self.stop else ""
        if len(self.text) <= self.emitted:
            return None
        event = TokenEvent(self.ids[-1] if self.ids else -1, self.text[self.emitted :])
        self.emitted = len(self.text)
        return event

    def finished(self, prompt_tokens: int, forward_passes: int) -> Finished:
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
            forward_passes=forward_passes,
            think_forced=self.think_forced,
            prompt_ended_thinking=self.prompt_ended_thinking,
            first_token_at=None if self.first_token_s is None else self.start + self.first_token_s,
            backtracks=self.backtracks,
            stop_string=self.stop_string,
        )
