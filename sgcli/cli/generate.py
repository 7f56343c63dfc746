"""`sgcli generate`: stream a constrained generation, validate it, emit text or JSONL."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from sgcli.backends.keyword_coverage import guarantee
from sgcli.backends.matching import enforcing_backends
from sgcli.batch.records import RecordWriter
from sgcli.batch.requests import BadLine, Request, duplicate_ids, read_requests, start_prompt
from sgcli.cli import constraint_options as co
from sgcli.cli import engine_options as eo
from sgcli.cli import model_options as mo
from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, err, output_format_of
from sgcli.constraints.sources import read_bytes
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError
from sgcli.lint import preflight

DEFAULT_BATCH_SIZE = 32  # measured: benchmarks/batch_throughput.py, docs/performance.md "Batch" (Run 5)

EXAMPLES = """
Examples:

  sgcli generate --schema examples/capital.json "What is the capital of France?"

  sgcli generate --json --regex '(Paris|London)' "Capital of France?"

  sgcli generate --choice yes --choice no "Is water wet?"

  sgcli generate --schema s.json --input prompts.jsonl --output results.jsonl

  echo '{"type":"integer"}' | sgcli generate --schema - "Pick a number"
"""


@co.takes_constraint(guarantee=True)
@eo.takes_engine()
@mo.takes_prompt()
@mo.takes_sampling()
@mo.takes_model()
def generate(
    prompt: Annotated[Optional[str], typer.Argument(help="The prompt ('-' reads stdin). Omit with --input.")] = None,
    backend: co.BackendOpt = None,
    model_flags: mo.ModelFlags = None,
    sampling: mo.SamplingFlags = None,
    prompt_flags: mo.PromptFlags = None,
    reasoning: Annotated[
        bool,
        typer.Option(
            "--reasoning",
            help="Let a reasoning model think freely; constrain only the answer after --think-end.",
            rich_help_panel="Prompt",
        ),
    ] = False,
    think_end: Annotated[
        str, typer.Option("--think-end", help="End-of-thinking marker for --reasoning.", rich_help_panel="Prompt")
    ] = "</think>",
    think_budget: Annotated[
        Optional[int],
        typer.Option(
            "--think-budget",
            help="With --reasoning: after this many thinking tokens (or where the model stops while thinking), "
            "force the end-of-thinking marker.",
            rich_help_panel="Prompt",
        ),
    ] = None,
    jump_forward: Annotated[
        bool,
        typer.Option(
            "--jump-forward/--no-jump-forward",
            help="Append text the grammar forces in one forward pass (same output, fewer passes).",
            rich_help_panel="Sampling",
        ),
    ] = True,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    input_file: Annotated[
        Optional[str],
        typer.Option(
            "--input", "-i", help="JSONL of {id, prompt} or {id, messages} ('-' = stdin).", rich_help_panel="Output"
        ),
    ] = None,
    batch_size: Annotated[
        Optional[int],
        typer.Option(
            "--batch-size",
            help=f"Decode this many --input requests together (continuous batching; default {DEFAULT_BATCH_SIZE}). "
            "1 = one after another. Batched rows feed tokens the grammar forces with the token before them "
            "(jump-forward without drafts).",
            rich_help_panel="Output",
        ),
    ] = None,
    output: Annotated[
        Optional[Path],
        typer.Option("--output", "-o", help="Write records here instead of stdout.", rich_help_panel="Output"),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No summary line on stderr.", rich_help_panel="Output")
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="With --input and --output: skip ids already in the output, append the rest.",
            rich_help_panel="Output",
        ),
    ] = False,
    engine_flags: eo.EngineFlags = None,
    flags: co.ConstraintFlags = None,
) -> None:
    """Generate text that is guaranteed to match a constraint, then validate it.

    Every output is re-checked by an independent checker (jsonschema, lark, regex, ...);
    the record's validated_by says which. valid is null ("unchecked", with the reason)
    when no independent checker can read the constraint: that is not a success claim.
    Exit codes: 0 no output invalid, 1 some output invalid (e.g. cut off by
    --max-tokens), 2 bad input or flags, 3 internal error. Batch records (--input) are
    always JSON Lines, one per request, in input order.
    """
    # A single prompt prints its record (json or jsonl: one object either way) or its text.
    json_out = output_format_of(output_format, json_out, stream=True) != "text"
    from sgcli import backends

    backend = backend or backends.DEFAULT_BACKEND
    spec = flags.spec(required=backends.enforces(backend))
    spec = dataclasses.replace(spec, json_options=dataclasses.replace(spec.json_options, for_generation=True))
    preflight.structure_errors(spec)  # an undefined rule fails here, before any library loads
    if not think_end:
        raise UserError("--think-end must not be empty")
    sampling.check()
    prompt_flags.check()
    model_flags.check()
    if batch_size is not None and batch_size < 1:
        raise UserError("--batch-size must be at least 1")
    if batch_size is not None and input_file is None:
        raise UserError("--batch-size needs --input", hint="sgcli generate --input prompts.jsonl --batch-size 8")
    if think_budget is not None and (think_budget < 0 or not reasoning):
        raise UserError(
            "--think-budget must be 0 or more" if think_budget < 0 else "--think-budget needs --reasoning",
            hint="sgcli generate --reasoning --think-budget 64 ...",
        )
    if (prompt is None) == (input_file is None):
        raise UserError(
            "give a prompt or --input FILE (not both)" if prompt is not None else "no prompt given",
            hint='sgcli generate --schema s.json "your prompt", or --input prompts.jsonl',
        )
    if prompt == "-" and input_file is None:
        prompt = sys.stdin.read()
    if flags.schema == "-" and input_file == "-":
        raise UserError("--schema - and --input - both read stdin; put one in a file")
    # Read every input before the slow work, so a typo fails in milliseconds.
    batch = read_bytes(input_file, what="input file") if input_file else None
    if resume and batch is None:
        raise UserError("--resume is for batches", hint="use --resume with --input FILE --output FILE")
    writer = RecordWriter(output, resume=resume)  # a bad --output fails here, before anything loads
    if not engine_flags.local:
        from sgcli.cli.generate_engine import generate_on_engine, reject_local_only

        reject_local_only(
            **{
                "--reasoning": reasoning,
                "--template-name": prompt_flags.template_name,
                "--chat-template-kwargs": prompt_flags.chat_template_kwargs,
                **model_flags.local_only(),
            }
        )
        code = generate_on_engine(
            engine_flags.engine,
            engine_flags.client(),
            spec,
            served_model=engine_flags.served_model,
            sampling=sampling.for_server(),
            system=prompt_flags.system,
            raw=prompt_flags.raw,
            prompt=prompt,
            batch=batch,
            json_out=json_out,
            writer=writer,
            quiet=quiet,
        )
        raise typer.Exit(code)
    if backend != "auto":
        backends.check_supports(backend, spec)  # fail fast, before the model loads
    ref = model_flags.ref()

    from sgcli.cli.progress import stage_progress

    # Grammar first, model last: the tokenizer loads fast, the model is the slow part.
    with stage_progress(f"loading {ref.display} tokenizer") as progress:
        tokenizer = model_flags.tokenizer(progress=lambda text: progress(text, 0, 3))
    # A single prompt's chat template renders in a forked child while torch loads here (importing
    # transformers' renderer takes most of a second); batches render in process, one import for all.
    request = Request(None, prompt)
    pending = None if batch is not None else start_prompt(tokenizer, prompt_flags.options(), request, in_child=True)
    try:
        compiled, fallbacks, kept = _compile_checked(
            backend, spec, tokenizer, sampling.max_tokens, flags.allow_unenforced
        )
        import sgcli.engine.session  # noqa: F401  # torch and the decode loop, meanwhile

        ready = pending.result() if pending else None  # a template error is exit 2 before the weights load
        with stage_progress(f"loading {ref.display}") as progress:
            lm = model_flags.load(ref, progress)
    finally:
        if pending:
            pending.cancel()  # a compile or load error: the child's render is not wanted
    if lm.logits_width > len(tokenizer.vocab):  # the model has more logits than tokens: mask those too
        compiled = backends.compile_for(compiled.backend, spec, tokenizer.vocab.padded(lm.logits_width))[0]
    session = mo.new_session(
        lm,
        tokenizer,
        compiled,
        sampling,
        prompt_flags,
        fallbacks=fallbacks,
        weakened=kept.weakened,
        unenforced=kept.unenforced,
        think_end=think_end if reasoning else None,
        think_budget=think_budget,
        jump_forward=jump_forward,
    )

    try:
        if batch is not None:
            all_valid = _run_batch(session, batch, writer, quiet=quiet, batch_size=batch_size or DEFAULT_BATCH_SIZE)
        else:
            all_valid = _run_one(session, request, ready, json_out=json_out, sink=writer, quiet=quiet)
    finally:
        writer.close()
    raise typer.Exit(EXIT_OK if all_valid else EXIT_FINDINGS)


def _run_batch(session, batch: tuple[bytes, str], writer, *, quiet: bool = False, batch_size: int = 1) -> bool:
    """Every input line answered by one record; a failing request becomes an error record, the batch goes on."""
    import signal

    from rich.markup import escape

    from sgcli.cli.progress import count_progress
    from sgcli.engine.session import Request

    items = list(read_requests(*batch))
    dups = duplicate_ids(items)
    if dups:
        shown = ", ".join(json.dumps(d, ensure_ascii=False) for d in dups[:5]) + (" ..." if len(dups) > 5 else "")
        what = "only the first of each is answered" if writer.resume else "each line still gets its own record"
        err.print(
            f"[yellow]warning[/]: {len(dups)} id{'s' if len(dups) > 1 else ''} used on several input lines: "
            f"{escape(shown)} ({what})"
        )
    todo = [item for item in items if not writer.skip(item.id)]  # --resume: ids already answered
    skipped, all_valid, tally = len(items) - len(todo), True, BatchTally()
    records = _records(session, [it for it in todo if isinstance(it, Request)], batch_size)
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM ends like Ctrl-C: complete lines only
    try:
        with count_progress("generating", len(todo)) as advance:
            for item in todo:
                record = _bad_line_record(session, item) if isinstance(item, BadLine) else next(records)
                all_valid &= record["valid"] is not False
                writer.write(record)
                tally.add(record)
                advance()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if skipped:
        err.print(f"[cyan]note[/]: --resume: {skipped} of {len(items)} ids were already answered in {writer.path}")
    if not quiet:
        err.print(tally.summary(), highlight=False)
    return all_valid


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _bad_line_record(session, item) -> dict:
    return session.error_record(None, [f"{item.location}: {item.message}"], rid=item.id)


def _run_checked(session, request) -> dict:
    """One request's record; a failure of this request alone (a prompt longer than the context) is an
    error record, and the batch goes on."""
    try:
        return _run_quiet(session, request)
    except UserError as exc:
        return session.error_record(request, [exc.render().removeprefix("error: ")])


def _compile_checked(backend: str, spec, tokenizer, max_tokens: int, allow_unenforced: bool = False):
    """Compile against the model's tokenizer, say what the backend weakens (and what sgcli's schema checker
    enforces in its place), refuse what nothing enforces unless `allow_unenforced`, and run the lint rules
    that predict certain failure. Returns (compiled, fallbacks, keyword_coverage.Guarantee)."""
    from rich.markup import escape

    from sgcli import backends

    compiled, fallbacks = backends.compile_for(backend, spec, tokenizer.vocab)
    for fb in fallbacks:
        err.print(f"[yellow]fallback[/]: {fb['backend']} skipped: {escape(fb['reason'])}")
    for w in compiled.warnings:
        where = f" (at {w.pointer})" if w.pointer else ""
        err.print(f"[yellow]warning[/]: {compiled.backend}: {w.message}{where}")
    kept = guarantee(compiled, allow_unenforced=allow_unenforced)  # exit 2 here, before the model loads
    for note in kept.notes:
        err.print(f"[cyan]note[/]: {escape(note)}", highlight=False)
    if compiled.backend in enforcing_backends():
        for d in preflight.certain_failures(spec, compiled, max_tokens, tokenizer.name):
            err.print(f"[yellow]warning[/]: {d.code} {escape(d.message)}\n  hint: {escape(d.hint or '')}")
    return compiled, fallbacks, kept


def _records(session, requests, batch_size: int):
    """Records for `requests` in input order: batched, or one after another at batch size 1."""
    why = session.batch_unsupported() if batch_size > 1 else None
    if why:
        err.print(f"[yellow]note[/]: --batch-size {batch_size} not used, decoding one request at a time: {why}")
    if batch_size > 1 and not why:
        return session.batch(requests, batch_size)
    return (_run_checked(session, r) for r in requests)


def _run_quiet(session, request) -> dict:
    from sgcli.engine.session import Done

    for event in session.stream(request):
        if isinstance(event, Done):
            return event.record
    raise AssertionError("stream ended without a record")


def _run_one(session, request, prompt, *, json_out: bool, sink, quiet: bool) -> bool:
    from sgcli.engine.session import Done

    record = None
    for event in session.stream(request, prompt):
        if isinstance(event, Done):
            record = event.record
            for notice in event.notices:
                err.print(f"[cyan]note[/]: {notice}")
        elif not json_out and event.text:
            if event.phase == "reasoning":
                err.print(event.text, end="", style="dim", markup=False)
                continue
            sink.write_text(event.text)
    assert record is not None
    return end_single(record, json_out=json_out, sink=sink, quiet=quiet)


def end_single(record: dict, *, json_out: bool, sink, quiet: bool) -> bool:
    """After a single prompt's streamed text: its record (--json) or a newline, then the summary line;
    whether the output was not invalid. Shared with `--engine` runs (generate_engine.py)."""
    if json_out:
        sink.write(record)
    else:
        sink.write_text("\n")
    if not quiet:
        _summary(record)
    return record["valid"] is not False


def _summary(record: dict) -> None:
    t, usage = record["timings"], record["usage"]
    tps = f"{t['tokens_per_s']:.1f} tok/s" if t["tokens_per_s"] else "- tok/s"
    ttft = f"first token {t['first_token_ms'] / 1000:.2f} s" if t["first_token_ms"] is not None else "no token"
    if t.get("start_to_first_token_ms") is not None:  # the wait a user sees: process start to that token
        ttft += f" (ready {t['start_to_first_token_ms'] / 1000:.2f} s from start)"
    forced = f" ({usage['forced_tokens']} forced)" if usage.get("forced_tokens") else ""
    threads = f"{t['threads']} thread{'s' if t['threads'] != 1 else ''} · " if t.get("threads") else ""
    valid = {True: "[green]valid[/]", False: "[red]invalid[/]"}.get(record["valid"], "[yellow]unchecked[/]")
    if record.get("validated_by"):
        valid += f" [dim](checked by {record['validated_by']})[/]"
    placed = (
        f" ({record['device']}, {record['dtype']}, {record.get('model_impl')}"
        f"{' + ' + record['kernel'] if record.get('kernel') else ''}, template {record['chat_template']})"
        if "device" in record
        else ""
    )
    err.print(
        f"[dim]{record['backend']} · {record['model']}{placed} · {usage['completion_tokens']} tokens{forced} · "
        f"{tps} · {ttft} · {threads}finish: {record['finish_reason']} ·[/] {valid}"
    )
    for e in record["errors"]:
        err.print(f"  [red]✗[/] {e}")
    if record.get("unchecked"):
        err.print(f"  [yellow]?[/] not checked: {record['unchecked']}")


class BatchTally:
    """The one line a batch ends with on stderr: how many records, how they fared, how fast."""

    def __init__(self) -> None:
        import time

        self.start = time.perf_counter()
        self.n = self.valid = self.invalid = self.unchecked = self.errors = self.tokens = 0

    def add(self, record: dict) -> None:
        self.n += 1
        self.tokens += (record.get("usage") or {}).get("completion_tokens") or 0
        if record.get("finish_reason") == "error":
            self.errors += 1
        elif record.get("valid") is True:
            self.valid += 1
        elif record.get("valid") is None:
            self.unchecked += 1
        else:
            self.invalid += 1

    def summary(self) -> str:
        import time

        elapsed = time.perf_counter() - self.start
        rate = f"{self.tokens / elapsed:.1f} tok/s" if elapsed > 0 and self.tokens else "- tok/s"
        unchecked = f", {self.unchecked} unchecked" if self.unchecked else ""
        return (
            f"{self.n} records: {self.valid} valid, {self.invalid} invalid{unchecked}, {self.errors} errors · "
            f"{self.tokens} tokens in {elapsed:.1f} s ({rate})"
        )
