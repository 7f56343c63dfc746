"""The in-process model as the runner of a generate request.

Grammar first, model last: the tokenizer loads fast and the grammar compiles against it (its
warnings said at once), while the chat template renders the prompt (or a batch's prompts) in a
forked child; then torch and the weights. One `Session` then answers the single prompt or every
request of a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sgcli import backends
from sgcli.app.report import Reporter
from sgcli.app.request import GenerateRequest
from sgcli.backends.base import warning_lines
from sgcli.backends.guarantee import guarantee
from sgcli.backends.matching import enforcing_backends
from sgcli.batch.requests import BadLine, PromptOptions, Request, read_requests, start_prompt, start_prompts
from sgcli.batch.sampling import SamplingParams
from sgcli.engine import checkpoint, loader
from sgcli.engine import threads as cpu_threads
from sgcli.errors import UserError, plural
from sgcli.lint import preflight


class LocalRunner:
    """Records from one session: one model, one tokenizer, one compiled constraint."""

    title = "generating"
    open_at_start = True  # once loaded, the run starts: the output is opened (created, emptied, repaired) now

    def __init__(self, session, reporter: Reporter, *, batch_size: int = 1, ready=None):
        self.session, self.reporter, self.batch_size, self.ready = session, reporter, batch_size, ready

    @classmethod
    def load(cls, request: GenerateRequest, reporter: Reporter) -> LocalRunner:
        """Load what `request` needs, in the order that fails fastest."""
        local = request.local
        ref = local.model.ref()
        loader.check_weights(ref)  # a damaged or missing safetensors file: exit 2 before anything slow
        weights = local.model.start_weights(ref)  # a .gguf's dequantization, in a child, meanwhile
        pending = batch_prompts = None
        try:
            with reporter.stage(f"loading {ref.display} tokenizer") as progress:
                tokenizer = local.model.tokenizer(progress=lambda text: progress(text, 0, 3))
            checkpoint.check_tokenizer_fits(ref, checkpoint.text_tokens(tokenizer.vocab))  # before anything slow
            # Chat templates render in a forked child while torch and the weights load here (importing
            # transformers' renderer takes most of a second): a single prompt's, or a whole batch's in one.
            if request.batch is None:
                pending = start_prompt(tokenizer, request.prompt_options, Request(None, request.prompt), in_child=True)
            else:  # a batch's prompts render in one child, importing the renderer there, not here
                lines = read_requests(*request.batch, raw=request.prompt_options.raw)
                reqs = [item for item in lines if isinstance(item, Request)]
                batch_prompts = start_prompts(tokenizer, request.prompt_options, reqs)
            compiled, fallbacks, kept = compile_checked(
                local.backend, request.spec, tokenizer, request.sampling.max_tokens, reporter, local.allow_unenforced
            )
            import sgcli.engine.session  # noqa: F401  # torch and the decode loop, meanwhile

            ready = pending.result() if pending else None  # a template error is exit 2 before the weights load
            with reporter.stage(f"loading {ref.display}") as progress:
                lm = local.model.load(ref, progress, pending=weights)
            rendered = batch_prompts.result() if batch_prompts else None
        finally:
            for started in (weights, pending, batch_prompts):
                if started:
                    started.cancel()  # after an error: the children's work is not wanted (else a no-op)
        checkpoint.check_logits_fit(lm, checkpoint.text_tokens(tokenizer.vocab))
        if lm.logits_width > len(tokenizer.vocab):  # the model has more logits than tokens: mask those too
            compiled = backends.compile_for(compiled.backend, request.spec, tokenizer.vocab.padded(lm.logits_width))[0]
        session = new_session(
            lm,
            tokenizer,
            compiled,
            request.sampling,
            request.prompt_options,
            fallbacks=fallbacks,
            weakened=kept.weakened,
            unenforced=kept.unenforced,
            think_end=local.think_end,
            think_budget=local.think_budget,
            jump_forward=local.jump_forward,
        )
        session.rendered = rendered
        return cls(session, reporter, batch_size=request.batch_size, ready=ready)

    def run_single(self, req: Request, show: Callable[[str], None] | None) -> dict:
        from sgcli.engine.session import Done

        record = None
        for event in self.session.stream(req, self.ready):
            if isinstance(event, Done):
                record = event.record
                for notice in event.notices:
                    self.reporter.notice("note", notice)
            elif show is not None and event.text:
                if event.phase == "reasoning":
                    self.reporter.reasoning(event.text)
                    continue
                show(event.text)
        assert record is not None
        return record

    def run_batch(self, items: list[Request | BadLine], put: Callable[[int, dict], None]) -> None:
        records = self._records([it for it in items if isinstance(it, Request)])
        for index, item in enumerate(items):
            put(index, self._bad_line_record(item) if isinstance(item, BadLine) else next(records))

    def _records(self, requests: list[Request]) -> Iterator[dict]:
        """Records for `requests` in input order: batched, or one after another at batch size 1."""
        size = self.batch_size = max(1, min(self.batch_size, len(requests)))  # rows there are to fill
        why = self.session.batch_unsupported() if size > 1 else None
        if why:
            self.reporter.notice("note", f"--batch-size {size} not used, decoding one request at a time: {why}")
        if size > 1 and not why:
            return self.session.batch(requests, size)
        return (run_checked(self.session, r) for r in requests)

    def how(self) -> str:
        size = self.batch_size if self.batch_size > 1 and not self.session.batch_unsupported() else 1
        threads = self.session.lm.threads
        rows = f"batch {size}" if size > 1 else "one request at a time"
        if not threads:
            return rows
        said = f"{rows}, {plural(threads, 'thread')}"
        changes = cpu_threads.changes()  # the governor's: other work came or went during the run
        if len(changes) > 3:
            return said + f" (changed {len(changes)} times as other work came and went, {changes[-1]} at the end)"
        return said + (f" (then {', then '.join(map(str, changes))}, as other work came and went)" if changes else "")

    def _bad_line_record(self, item: BadLine) -> dict:
        return self.session.error_record(None, [f"{item.location}: {item.message}"], rid=item.id)


def run_checked(session, request: Request) -> dict:
    """One request's record; a failure of this request alone (a prompt longer than the context) is an
    error record, and the batch goes on."""
    from sgcli.engine.session import Done

    try:
        for event in session.stream(request):
            if isinstance(event, Done):
                return event.record
    except UserError as exc:
        return session.error_record(request, [exc.one_line(request.location)])
    raise AssertionError("stream ended without a record")


def compile_checked(backend: str, spec, tokenizer, max_tokens: int, reporter: Reporter, allow_unenforced=False):
    """Compile against the model's tokenizer, say what the backend weakens (and what sgcli's schema checker
    enforces in its place), refuse what nothing enforces unless `allow_unenforced`, and run the lint rules
    that predict certain failure. Returns (compiled, fallbacks, guarantee.Guarantee)."""
    compiled, fallbacks = backends.compile_for(backend, spec, tokenizer.vocab)
    for fb in fallbacks:
        reporter.notice("fallback", f"{fb['backend']} skipped: {fb['reason']}")
    for line in warning_lines(compiled.warnings):
        reporter.notice("warning", f"{compiled.backend}: {line}")
    kept = guarantee(compiled, allow_unenforced=allow_unenforced)  # exit 2 here, before the model loads
    for note in kept.notes:
        reporter.notice("note", note)
    if compiled.backend in enforcing_backends():
        for d in preflight.certain_failures(spec, compiled, max_tokens, tokenizer.name):
            reporter.notice("warning", f"{d.code} {d.message}\n  hint: {d.hint or ''}")
    return compiled, fallbacks, kept


def new_session(lm, tokenizer, compiled, sampling: SamplingParams, prompt_options: PromptOptions, **options):
    """A generation session run as `sampling` and `prompt_options` say (`options`: Session's own keywords)."""
    from sgcli.engine.session import Session

    return Session(
        lm,
        tokenizer,
        compiled,
        sampling,
        sampling.max_tokens,
        sampling.stop,
        prompt_options,
        repetition_guard=sampling.repetition_guard,
        **options,
    )
