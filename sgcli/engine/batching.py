"""Continuous batched decoding for JSONL input: many requests, one forward pass per step.

Why: a one-row decode step is bound by reading the weights; rows decoded together share each
read, so a step of 16 rows costs a few times a step of one, not 16 times. Each row keeps its own
matcher, stop strings and token budget; a row that ends leaves the batch and a waiting request
takes its place (continuous batching). Rows of different lengths share one KV cache, aligned on
the right and padded on the left with masked zero columns; explicit position ids keep each row's
positions its own, so greedy outputs match the single-stream loop. Prompts that share a head
(system prompt, chat-template preamble) prefill it once and reuse its KV cache
(`sgcli.engine.prefix`). The requests admitted together prefill the rest of their prompts as rows
joining the batch, with a cache of their own: fed in chunks of PREFILL_CHUNK tokens in the same
passes as the batch's steps (`Runtime.hidden_parts`: the running rows do not wait, the weights are
read once), then joined to it once every prompt is fed. Where the runtime cannot run such passes
(transformers'), they prefill in a pass of their own, padded on the right, before the next step.

The model runs without its output projection (`sgcli.engine.head`): each row's logits are
computed after its grammar mask, for the whole vocabulary only where the mask allows many
tokens, for the allowed ids where it allows few, and not at all where it allows one.

Jump-forward inside batches: after a row takes its token, every following token its grammar
forces (a mask that allows exactly one) is taken at once and fed in the same step as that token,
the shorter rows padded on the right (masked columns, compacted once they are the majority).
Then the grammar's forced text (xgrammar's and llguidance's forced bytes, spelled in tokens:
`sgcli.engine.forced`) is fed after them as a draft, where the step's width leaves room: the
row keeps draft tokens while the model chooses them, as the single-stream loop does, and the
cache columns of the ones it turned down are masked (`sgcli.engine.kv_batch`), not cropped, since
the other rows share the cache.

Backtracking (the rules are `sgcli.engine.sequence`'s, as in the single-stream loop): where a
row's checked grammar leaves no token, the row undoes its last token; the cache columns of the
tokens after the one before it are masked for that row (the other rows share the cache, so
nothing is cropped) and that token is fed again at its own position in the next step, which
gives the undone position's logits, sampled with the undone token banned (`KVBatch.backtrack`).
The shared cache and the step that feeds it: `sgcli.engine.kv_batch`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from sgcli.backends.base import Compiled
from sgcli.engine import threads
from sgcli.engine.decode import backend_jumps, why_no_backtrack
from sgcli.engine.forced import Spellings, draft_tokens
from sgcli.engine.head import OutputHead, narrow_limit, row_logits
from sgcli.engine.kv_batch import KVBatch, prefill, unprefilled
from sgcli.engine.loader import LoadedModel
from sgcli.engine.prefix import PrefixStore, prefill_groups
from sgcli.engine.sampling import Masker, SamplingParams
from sgcli.engine.sequence import Allowed, Finished, SequenceState

MAX_FORCED_RUN = 64  # at most this many forced tokens fed to a row in one step
# Prompt tokens fed to the joining rows in one step, beside the batch's own (0: prefill in passes of
# their own, as for a runtime without `supports.parts`).
PREFILL_CHUNK = 512


class Row:
    """One request of a batch: its place, prompt and `SequenceState` (the single-stream loop's
    per-token rules), without events."""

    def __init__(
        self, index: int, prompt_ids: list[int], seq: SequenceState, jump_forward: bool = True, drafting: bool = False
    ):
        self.index, self.prompt_ids, self.seq, self.jump_forward = index, prompt_ids, seq, jump_forward
        self.forward_passes = 0  # model calls this row took part in (its prefill, then batched steps)
        self.prompt_fed = False  # its whole prompt has been through the model (it chooses tokens now)
        self.finished: Finished | None = None
        self.ahead: Allowed | None = None  # the mask of the next position, where already filled
        self.drafting = drafting  # jump-forward drafts of the grammar's forced text, which the model confirms
        self.draft: list[int] = []  # the draft to feed after the row's next tokens (guesses, not taken yet)
        self.spellings = Spellings(seq.vocab)

    def allowed(self, narrow: int) -> Allowed | None:
        ahead, self.ahead = self.ahead, None
        return ahead if ahead is not None else self.seq.allowed(narrow)

    def advance(self, token: int | None, masker: Masker, narrow: int) -> list[int] | None:
        """Take the token this row chose (None: its grammar allowed nothing) and, with jump-forward,
        every token after it that the grammar forces (a mask that allows one token: taken without
        a forward pass of its own). Returns the tokens to feed next; None once the row has finished."""
        seq = self.seq
        feed = []
        if token is not None:
            seq.take(token)
            feed.append(token)
        while self.jump_forward and not seq.done and len(feed) < MAX_FORCED_RUN:
            allowed = seq.allowed(narrow)
            if allowed is None:
                break
            if allowed.count > 1:
                self.ahead = allowed
                break
            forced = seq.choose(allowed, None, masker)
            seq.take(forced)
            seq.forced += 1
            feed.append(forced)
        if not seq.done:  # at a dead end, the next step's mask says so again and the batch backtracks
            self.draft = [] if seq.dead_end else self._draft(feed[-1])
            return feed
        seq.flush()
        self.finished = seq.finished(len(self.prompt_ids), self.forward_passes)
        return None

    def _draft(self, previous: int) -> list[int]:
        """The grammar's forced text after `previous`, as tokens the model may confirm (none while
        thinking, after the grammar ended, or without drafting)."""
        seq = self.seq
        if not self.drafting or seq.thinking or seq.matcher.is_terminated():
            return []
        room = seq.max_tokens - len(seq.ids) - 1
        return draft_tokens(seq.vocab, previous, seq.matcher.jump_forward(), room, self.spellings)

    def confirm(
        self, draft: list[int], hidden: torch.Tensor, head: OutputHead, masker: Masker
    ) -> tuple[int | None, int]:
        """Choose this row's tokens at the positions after its fed tokens, `hidden` [1 + len(draft),
        width]: draft tokens are taken while the model chooses them (as the single-stream loop keeps
        its drafts), and the first token it chooses otherwise (or after the whole draft) is returned
        for `advance`. Returns (that token, or None where the row ended; how many draft tokens were
        not kept, whose positions the batch must hide)."""
        self.forward_passes += 1
        narrow = narrow_limit(masker.width, hidden.device)
        seq = self.seq
        for i in range(len(draft) + 1):
            allowed = self.allowed(narrow)
            token = (
                None
                if allowed is None
                else seq.choose(allowed, row_logits(head, hidden[i], allowed, masker.width), masker)
            )
            if token is None or i == len(draft):
                return token, len(draft) - i
            if token != draft[i]:
                self.spellings.turned_down(draft[i], token)
                return token, len(draft) - i
            seq.take(token)
            seq.forced += 1
            if seq.done:
                return None, len(draft) - i - 1
        raise AssertionError("unreachable")


def choose_tokens(rows: Sequence[Row], hidden: torch.Tensor, head: OutputHead, masker: Masker) -> list[int | None]:
    """Each row's next token from its hidden state [rows, width]: masks first, then only the logits
    the masks leave a choice between (one projection for all the rows whose mask is wide)."""
    for row in rows:
        row.forward_passes += 1
    narrow = narrow_limit(masker.width, hidden.device)
    allowed = [row.allowed(narrow) for row in rows]
    wide = [i for i, a in enumerate(allowed) if a is not None and a.ids is None]
    full = dict(zip(wide, head.logits(hidden[wide]))) if wide else {}
    tokens = []
    for i, (row, a) in enumerate(zip(rows, allowed)):
        if a is None:
            tokens.append(None)
            continue
        logits = full[i] if i in full else row_logits(head, hidden[i], a, masker.width)
        tokens.append(row.seq.choose(a, logits, masker))
    return tokens


def unsupported_reason(lm: LoadedModel) -> str | None:
    """Why this model cannot be batched (None when it can)."""
    if lm.runtime.supports.splice is not None:
        return f"{lm.ref.display}: {lm.runtime.supports.splice}"
    if lm.runtime.head() is None:
        return f"{lm.ref.display} computes its logits in a way sgcli cannot reproduce from its hidden states"
    return None


@dataclass
class BatchStats:
    """What a batched run did, for benchmarks and summaries."""

    steps: int = 0
    row_steps: int = 0  # sum over steps of the rows decoded together
    prefill_tokens: int = 0  # prompt tokens run through the model (shared heads once, then each prompt's rest)
    prefill_passes: int = 0  # per group of shared heads, and per prefill pass or step that fed prompt chunks
    reused_prefix_tokens: int = 0
    joint_steps: int = 0  # steps that fed joining rows' prompt chunks beside the batch's tokens, in one pass


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
    jump_forward: bool = True,
    stats: BatchStats | None = None,
    repetition_guard: bool = True,
) -> Iterator[tuple[int, Finished]]:
    """Decode every prompt, `batch_size` rows at a time; yields (prompt index, Finished) as rows
    end, in completion order. A row's error (grammar dead end, rejected token) ends that row only.
    `max_tokens` is one budget for every prompt, or one per prompt. With `jump_forward`, tokens
    the grammar forces are fed with the token before them, in the same step."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    stats = stats if stats is not None else BatchStats()
    runtime = lm.runtime
    head = runtime.head()
    if head is None:
        raise ValueError(unsupported_reason(lm))
    store = PrefixStore(runtime, lm.device, prompts, share=share_prefix)
    masker = Masker(lm.logits_width, lm.device)

    drafting = jump_forward and backend_jumps(compiled)
    # None: rows backtrack (by masking their columns: batches never crop); "": a bare grammar's dead ends end it
    no_backtrack = "" if why_no_backtrack(lm, compiled) == "" else None

    def new_row(i: int) -> Row:
        budget = max_tokens if isinstance(max_tokens, int) else max_tokens[i]
        seq = SequenceState(
            compiled,
            params,
            max_tokens=budget,
            stop=stop,
            think_end=think_end,
            prompt_ids=prompts[i],
            device=lm.device,
            repetition_guard=repetition_guard,
            backtrack=no_backtrack is None,
            no_backtrack=no_backtrack or None,
        )
        return Row(i, list(prompts[i]), seq, jump_forward, drafting)

    batch = KVBatch(lm.device)
    # rows admitted but not prefilled yet, with a cache of their own: fed their prompts in chunks
    # in the same passes as the batch's steps, then joined to it (where the runtime runs such passes)
    joining = KVBatch(lm.device)
    chunked = runtime.supports.parts and PREFILL_CHUNK > 0
    waiting = iter(range(len(prompts)))
    with torch.inference_mode():
        while True:
            room = 0 if joining.rows else batch_size - len(batch.rows)
            rows = [new_row(i) for i in _take(waiting, room)]
            store.prepare(store.key(row.index, row.prompt_ids) for row in rows)  # the missing heads, side by side
            heads = [store.take(row.index, row.prompt_ids) for row in rows]
            tails = [len(row.prompt_ids) - n for row, (_, n) in zip(rows, heads)]
            if chunked and rows:
                joining = unprefilled(runtime, lm.device, rows, heads)
                stats.prefill_tokens += sum(tails)
            for group in [] if chunked else prefill_groups(tails):
                grouped = [rows[g] for g in group]
                prefilled, hidden = prefill(runtime, lm.device, grouped, [heads[g] for g in group])
                stats.prefill_tokens += sum(len(row.prompt_ids) - heads[g][1] for g, row in zip(group, grouped))
                stats.prefill_passes += 1
                yield from _advance(prefilled, choose_tokens(grouped, hidden, head, masker), masker)
                batch.join(prefilled)
            if not batch.rows and not joining.rows:
                if not rows:  # nothing running and nothing left to admit
                    break
                continue  # every admitted row ended at its first token: admit the next ones
            cohorts = [c for c in (batch, joining) if c.rows]
            threads.tick()  # between two steps: torch's threads follow other work that started meanwhile
            if len(cohorts) == 1:
                results = [cohorts[0].forward(runtime, PREFILL_CHUNK if cohorts[0] is joining else None)]
            else:  # the batch's step and the joining rows' prefill chunk: one pass, the weights read once
                passes = runtime.hidden_parts([batch.feed(runtime), joining.feed(runtime, PREFILL_CHUNK)])
                results = [c.took(hidden, cache) for c, (hidden, cache) in zip(cohorts, passes)]
                stats.joint_steps += 1
            stats.steps += 1
            stats.row_steps += sum(len(c.rows) for c in cohorts)
            stats.prefill_passes += joining in cohorts and any(not row.prompt_fed for row in joining.rows)
            for cohort, (spans, fed) in zip(cohorts, results):
                yield from _took(cohort, spans, fed, head, masker)
            if joining.rows and all(row.prompt_fed for row in joining.rows):
                batch.join(joining)
                joining = KVBatch(lm.device)
    stats.reused_prefix_tokens = store.reused_tokens
    stats.prefill_tokens += store.computed_tokens
    stats.prefill_passes += store.passes


def _took(batch: KVBatch, spans: list[torch.Tensor], fed: list[bool], head: OutputHead, masker: Masker):
    """After a step: each row fed all its waiting tokens chooses its next (confirming its draft
    first, where it was fed one); rows that end are yielded and leave the batch."""
    for i, done in enumerate(fed):
        row = batch.rows[i]
        row.forward_passes += not done  # fed part of its forced tokens or prompt: no token to choose yet
        row.prompt_fed = row.prompt_fed or done
    plain = [i for i, done in enumerate(fed) if done and not batch.drafted[i]]
    last = torch.stack([spans[i][-1] for i in plain]) if plain else None
    chosen = dict(zip(plain, choose_tokens([batch.rows[i] for i in plain], last, head, masker))) if plain else {}
    for i, done in enumerate(fed):
        if done and batch.drafted[i]:
            chosen[i], rejected = batch.rows[i].confirm(batch.drafted[i], spans[i], head, masker)
            batch.hide_draft(i, rejected)
    yield from _advance(batch, chosen, masker)
    batch.compact()


def _take(waiting: Iterator[int], n: int) -> Iterable[int]:
    for _ in range(n):
        i = next(waiting, None)
        if i is None:
            return
        yield i


def _advance(batch: KVBatch, tokens: dict[int, int | None] | Sequence[int | None], masker: Masker):
    """Each row given a token takes it (and what the grammar forces after it); rows still feeding
    forced tokens wait. Rows that end are yielded and leave the batch."""
    keep = []
    narrow = narrow_limit(masker.width, batch.device)
    chosen = tokens if isinstance(tokens, dict) else dict(enumerate(tokens))
    for i, row in enumerate(batch.rows):
        if i not in chosen:
            keep.append(i)
            continue
        if chosen[i] is None and row.seq.dead_end:
            batch.backtrack(i)
            keep.append(i)
            continue
        feed = row.advance(chosen[i], masker, narrow)
        if feed is None:
            yield row.index, row.finished
        else:
            batch.last[i] = feed
            keep.append(i)
    batch.keep(keep)
