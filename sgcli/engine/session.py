"""A generation session: one model, one tokenizer, one compiled constraint, many prompts.

The grammar is compiled once per session (so once per batch); each request renders its
prompt, decodes, validates, and ends in one JSON-ready record.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.backends import get_backend
from sgcli.backends.base import Compiled
from sgcli.backends.matching import feed
from sgcli.batch.records import REASONING_ONLY, error_record, stop_cut_warning
from sgcli.batch.requests import Prompt, PromptOptions, Request, prompt_key, start_prompt
from sgcli.constraints.spec import Kind
from sgcli.engine import threads
from sgcli.engine.decode import decode
from sgcli.engine.loader import LoadedModel
from sgcli.engine.sampling import SamplingParams
from sgcli.engine.sequence import Finished, TokenEvent
from sgcli.errors import UserError
from sgcli.timing import percentile, start_to_first_token_ms
from sgcli.tokenizers.base import Tokenizer
from sgcli.validation.validate import validate
from sgcli.validation.verdict import Verdict


@dataclass
class Done:
    """The end of one request: the record, plus the notices worth telling a human."""

    record: dict
    notices: list[str] = field(default_factory=list)


@dataclass(eq=False)
class Session:
    lm: LoadedModel
    tokenizer: Tokenizer
    compiled: Compiled
    params: SamplingParams
    max_tokens: int
    stop: tuple[str, ...] = ()
    prompt_options: PromptOptions = field(default_factory=PromptOptions)
    fallbacks: list[dict] = field(default_factory=list)  # backends `auto` skipped, and why
    think_end: str | None = None  # reasoning mode: constrain only after this marker
    think_budget: int | None = None  # reasoning mode: force the marker after this many thinking tokens
    jump_forward: bool = True  # append grammar-forced text in one forward pass (same outputs, fewer passes)
    weakened: list[dict] = field(default_factory=list)  # [{pointer, keyword, backend}] the backend does not enforce
    repetition_guard: bool = True  # end an output stuck repeating one span (sgcli.engine.repetition)
    unenforced: list[dict] = field(default_factory=list)  # ... of which nothing enforces (--allow-unenforced)
    rendered: dict | None = None  # a batch's prompts rendered ahead (`start_prompts`), by `prompt_key`

    def render(self, req: Request) -> Prompt:
        found = None if self.rendered is None else self.rendered.get(prompt_key(req, self.prompt_options))
        if isinstance(found, UserError):
            raise found
        return found if found is not None else start_prompt(self.tokenizer, self.prompt_options, req).result()

    def placement(self, req: Request | None) -> dict:
        """Where and how the model ran and which chat template the request went through (record keys;
        the template is null for an input line that never became a request)."""
        opts = self.prompt_options
        if req is None:
            template = None
        elif opts.raw and req.messages is None:
            template = "none"
        else:
            template = self.tokenizer.template_label(opts.template_name, tools=req.tools is not None)
        return {
            "device": self.lm.device,
            "dtype": self.lm.dtype,
            "model_impl": self.lm.impl,
            "model_impl_reason": self.lm.impl_reason,
            "kernel": self.lm.kernel,
            "chat_template": template,
        }

    def stream(self, req: Request, prompt: Prompt | None = None) -> Iterator[TokenEvent | Done]:
        """Decode one request (`prompt`: its prompt, when rendered ahead by `start_prompt`)."""
        prompt = prompt if prompt is not None else self.render(req)
        ids, notices = prompt.ids, [*prompt.notices, *prompt.warnings]
        max_tokens, limit_note = self.fit_context(ids)
        if limit_note:
            notices.append(limit_note)
        finished: Finished | None = None
        for event in decode(
            self.lm,
            ids,
            self.compiled,
            params=self.params,
            max_tokens=max_tokens,
            stop=self.stop,
            think_end=self.think_end,
            jump_forward=self.jump_forward,
            think_budget=self.think_budget,
            repetition_guard=self.repetition_guard,
        ):
            if isinstance(event, Finished):
                finished = event
            else:
                yield event
        assert finished is not None
        yield Done(self.record(req, finished, limit_note, prompt.warnings), notices)

    def fit_context(self, ids: list[int]) -> tuple[int, str | None]:
        """(max new tokens, warning): a prompt that fills the context is refused, a long one gets fewer
        tokens; one holding a token past the model's rows (a special token only the tokenizer has, as
        Gemma 3's `<image_soft_token>` in a text model) is refused, not an IndexError in the forward."""
        beyond = next((i for i in ids if i >= self.lm.logits_width), None)
        if beyond is not None:
            name = self.tokenizer.vocab.tokens[beyond].decode(errors="replace")
            raise UserError(
                f"the prompt holds token {beyond} ({name!r}), past the model's "
                f"{self.lm.logits_width} embedding rows: the model has no such token",
                hint="leave that special token out of the prompt",
            )
        prompt_tokens = len(ids)
        limit = context_length(self.lm)
        if limit is None:
            return self.max_tokens, None
        if prompt_tokens >= limit:
            raise UserError(
                f"the prompt is {prompt_tokens} tokens, longer than the model's context of {limit} tokens",
                hint="shorten the prompt, or use a model with a longer context",
            )
        room = limit - prompt_tokens
        if self.max_tokens <= room:
            return self.max_tokens, None
        return room, f"--max-tokens {self.max_tokens} cut to {room}: the prompt uses {prompt_tokens} of {limit} tokens"

    def run_context(self, req: Request | None) -> dict:
        """The keys every record of this session shares: what constrained and what generated it."""
        return {
            "backend": self.compiled.backend,
            "fallbacks": self.fallbacks,
            "weakened": self.weakened,
            "unenforced": self.unenforced,
            "warnings": [str(w) for w in self.compiled.warnings],
            "model": self.lm.ref.display,
            **self.placement(req),
            "sampling": self.params.record(self.prompt_options.system),
        }

    def error_record(self, req: Request | None, errors: list[str], *, rid: Any = None) -> dict:
        """A failed request's record, with the same keys as a normal one (nulls where nothing ran)."""
        context = self.run_context(req)
        if self.think_end is not None:
            context.update(dict.fromkeys(REASONING_ONLY))
        if req is None:
            return error_record(rid, None, errors, **context)
        return error_record(req.id, req.prompt if req.messages is None else req.messages, errors, **context)

    def batch_unsupported(self) -> str | None:
        """Why this session's requests cannot be decoded in batches (None when they can)."""
        from sgcli.engine.batching import unsupported_reason

        if self.think_budget is not None:
            return "--think-budget is not implemented inside batches"
        return unsupported_reason(self.lm)

    def batch(self, requests: list[Request], batch_size: int, stats=None) -> Iterator[dict]:
        """Records for `requests` in input order, each yielded as soon as it and all before it are done.

        Requests are decoded `batch_size` at a time (sgcli.engine.batching); each gets the token
        budget `stream` would give it (`fit_context`), and one whose prompt cannot be rendered or
        does not fit the context gets the error record `stream`'s caller writes; the others go on.
        """
        from sgcli.engine.batching import decode_batch

        done: dict[int, dict] = {}  # records not yet yielded, by request index
        rows, prompts, budgets, notes, said = [], [], [], {}, {}
        for i, req in enumerate(requests):
            try:
                prompt = self.render(req)
                ids, said[i] = prompt.ids, prompt.warnings
                budget, notes[i] = self.fit_context(ids)
            except UserError as exc:
                done[i] = self.error_record(req, [exc.one_line(req.location)])
                continue
            rows.append(i)
            prompts.append(ids)
            budgets.append(budget)
        finished = decode_batch(
            self.lm,
            prompts,
            self.compiled,
            params=self.params,
            max_tokens=budgets,
            batch_size=batch_size,
            stop=self.stop,
            think_end=self.think_end,
            jump_forward=self.jump_forward,
            stats=stats,
            repetition_guard=self.repetition_guard,
        )
        flushed = 0
        for row, f in finished:
            done[rows[row]] = self.record(requests[rows[row]], f, notes[rows[row]], said[rows[row]])
            while flushed in done:
                yield done.pop(flushed)
                flushed += 1
        while flushed in done:  # trailing requests that failed before decoding
            yield done.pop(flushed)
            flushed += 1

    def record(self, req: Request, f: Finished, limit_note: str | None = None, prompt_warnings=()) -> dict:
        """The request's record; `limit_note` says why it got fewer tokens than --max-tokens, and
        `prompt_warnings` what is wrong with its prompt (a template that dropped the user's message)."""
        try:
            verdict = _verdict(self.compiled, f)
        except Exception as exc:  # a checker that cannot run on this output: fail closed, keep the output
            verdict = Verdict(False, None, [f"the output could not be validated: {type(exc).__name__}: {exc}"])
        errors = list(verdict.errors)
        if f.error and f.error not in errors:
            errors.insert(0, f.error)
        mask_ms = [s * 1000 for s in f.mask_s]
        record = {
            "schema_version": RECORD_SCHEMA_VERSION,
            "id": req.id,
            "prompt": req.prompt if req.messages is None else req.messages,
            "output": f.output,
            "parsed": verdict.parsed,
            "valid": False if f.error else verdict.valid,
            "validated_by": verdict.validated_by,
            "unchecked": verdict.unchecked,
            "errors": errors,
            "finish_reason": f.finish_reason,
            **self.run_context(req),
            "usage": {
                "prompt_tokens": f.prompt_tokens,
                "completion_tokens": f.completion_tokens,
                "forced_tokens": f.forced_tokens,
                "forward_passes": f.forward_passes,
                "backtracks": f.backtracks,
            },
            "timings": {
                "load_ms": _ms(self.lm.load_s),
                "threads": threads.current(self.lm.threads),  # as many as ran last (threads.Governor)
                "compile_ms": _ms(self.compiled.compile_s),
                "first_token_ms": _ms(f.first_token_s),
                "start_to_first_token_ms": start_to_first_token_ms(f.first_token_at),
                "tokens_per_s": None if f.tokens_per_s is None else round(f.tokens_per_s, 2),
                "mask_ms_p50": percentile(mask_ms, 0.5, 4),
                "mask_ms_p99": percentile(mask_ms, 0.99, 4),
            },
        }
        record["warnings"][:0] = prompt_warnings
        if limit_note:
            record["warnings"].append(limit_note)
        if f.stop_string is not None and record["valid"] is not True:
            record["warnings"].append(stop_cut_warning(f.stop_string, len(f.output)))
        if self.think_end is not None:
            record["reasoning"] = f.reasoning
            record["think_budget"] = {"tokens": self.think_budget, "forced_end": f.think_forced}
            if f.prompt_ended_thinking:
                record["warnings"].append(
                    f"the prompt already ends with the end-of-thinking marker {self.think_end!r} (the chat "
                    "template closed the thinking block): the constraint applied from the first token"
                )
        return record


def _ms(seconds: float | None) -> float | None:
    """A record's times are milliseconds (`*_ms` keys), to 0.1 µs."""
    return None if seconds is None else round(seconds * 1000, 4)


def context_length(lm: LoadedModel) -> int | None:
    """The model's context window in tokens, where its config says."""
    return lm.runtime.context_length()


def _verdict(compiled: Compiled, f: Finished):
    """The independent check of one output (sgcli.validation.validate), told how this backend
    reads regexes; its own matcher is offered only as a last resort, and only if it enforces."""

    caps = get_backend(compiled.backend).capabilities
    encode = compiled.vocab.encode

    def matcher_check(text: str) -> bool:
        return feed(compiled, list(encode(text))).accepted

    enforcing = Kind.NONE not in caps.kinds and encode is not None
    return validate(
        compiled.spec,
        f.output,
        finish_reason=f.finish_reason,
        grammar_complete=f.grammar_complete,
        dialect=caps.regex_dialect,
        matcher_check=matcher_check if enforcing else None,
        backend=compiled.backend,
    )
