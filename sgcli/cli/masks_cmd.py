"""`sgcli masks`: dry-run a grammar over a text's tokens and show each step's mask."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from sgcli.backends.base import warning_lines
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.matching import check_enforces
from sgcli.cli import constraint_options as co
from sgcli.cli.common import (
    JsonFlagOpt,
    JsonRows,
    OutputFormatOpt,
    err,
    escape,
    loading_note,
    out,
    output_format_of,
    sample_text,
    utf8_text,
)
from sgcli.cli.tables import print_table
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError, plural
from sgcli.grammar_dev.dryrun import dry_run, piece_text, token_text
from sgcli.lint import preflight
from sgcli.tokenizers import load_tokenizer

EXAMPLES = """
Examples:

  sgcli masks --schema examples/capital.json --text '{"country": "Fr'

  sgcli masks @json --text '[1, 2' --top 5

  sgcli masks --regex '[0-9]{4}-[0-9]{2}' --text '2024-1x' --json

  sgcli masks --structural-tag tags.json --text '<tool=get_weather>{"city": "Paris"}</tool>'

  sgcli masks examples/reasoning_json.lark --sub answer=examples/answer.schema.json -b llguidance
"""


@co.takes_constraint(generates=False)
def masks(
    grammar_file: Annotated[
        Optional[str],
        typer.Argument(
            metavar="GRAMMAR", help="Grammar file (kind from extension) or @name; or use a constraint flag."
        ),
    ] = None,
    text: Annotated[
        Optional[str],
        typer.Option(
            "--text",
            help="Text to tokenize and step through ('-': read it from stdin). Omit to see the first step.",
            callback=utf8_text,
        ),
    ] = None,
    tokenizer: co.TokenizerOpt = None,
    backend: co.BackendOpt = None,
    top: Annotated[int, typer.Option("--top", help="How many allowed tokens to show per step.")] = 8,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    flags: co.ConstraintFlags = None,
) -> None:
    """Step a grammar's matcher through the tokens of TEXT, no model needed.

    Per token: whether the grammar allows it, how many tokens it allows, a sample of
    them and the forced continuation. Where TEXT leaves the grammar: the token, the
    byte, and what was allowed there.

    Exit codes: 0 TEXT accepted or a valid prefix (or no TEXT), 1 TEXT rejected or the
    backend's matcher failed on the grammar, 2 bad input or flags.
    """
    from sgcli import backends

    if top < 0:
        raise UserError("--top must be 0 or more")
    if grammar_file is not None and flags.given():
        raise UserError(
            "give the grammar either as an argument or with a constraint flag, not both",
            hint="the text to step through goes in --text: sgcli masks --schema S.json --text '{\"a\": 1}'",
        )
    flags.one_stdin({"the grammar": grammar_file, "--text": text})
    spec = flags.file_spec(grammar_file) if grammar_file is not None else flags.spec()
    text = sample_text(text)  # '-': stdin, unless the grammar was read from there
    preflight.structure_errors(spec)  # an undefined rule, or one that never ends (G011), before the tokenizer
    backend = backend or backends.DEFAULT_BACKEND
    if backend != "auto":
        check_enforces(backend)
        backends.check_supports(backend, spec)  # fail fast, before the tokenizer loads
    vocab = load_tokenizer(tokenizer, progress=loading_note).vocab
    compiled, fallbacks = backends.compile_for(
        backend, spec, vocab, compile_one=lambda chosen: compile_cached(chosen, spec, vocab).compiled
    )
    for fb in fallbacks:
        err.print(f"[yellow]fallback[/]: {fb['backend']} skipped: {fb['reason']}")
    for line in warning_lines(compiled.warnings):
        err.print(f"[yellow]warning[/]: {compiled.backend}: {escape(line)}")
    run = dry_run(compiled, text, top=top)
    fmt = output_format_of(output_format, json_out, stream=True)
    if fmt != "text":  # one record per step, then a summary
        from sgcli import RECORD_SCHEMA_VERSION
        from sgcli.grammar_dev.dryrun import to_records

        writer = JsonRows(fmt)
        for record in to_records(run, vocab):  # sgcli/records/ MaskStep, MaskSummary
            writer.write({"schema_version": RECORD_SCHEMA_VERSION} | record)
        writer.close()
    else:
        _show(run, vocab, spec)
    raise typer.Exit(EXIT_FINDINGS if run.verdict in ("rejected", "error") else EXIT_OK)


def _sample(state, vocab, limit_note: bool = True) -> str:
    shown = " ".join(token_text(vocab, i) for i in state.sample)
    more = state.n_allowed - len(state.sample)
    return shown + (f" … +{more}" if more > 0 and limit_note else "")


def _byte_at(text: str, offset: int) -> str:
    data = text.encode("utf-8")
    if offset >= len(data):
        return ""
    byte = data[offset]
    # a non-ASCII byte is part of a character: as Latin-1 it would read as another character (\xa8 as ¨)
    return " (" + (repr(chr(byte))[1:-1] if byte < 0x80 else f"\\x{byte:02x}") + ")"


def _show(run, vocab, spec) -> None:
    name = spec.name
    from rich.table import Table

    if run.text is None and run.error is not None:
        out.print(f"[red]error[/]: the {run.backend} matcher failed at the first step: {escape(run.error)}")
        return
    if run.text is None:
        s = run.end
        out.print(f"first step of {escape(name)} on {run.backend}: {plural(s.n_allowed, 'token')} allowed")
        out.print(f"  allowed: {escape(_sample(s, vocab))}")
        if s.forced:
            out.print(f"  forced: {escape(piece_text(s.forced))}")
        out.print(f"  can stop: {'yes' if s.can_stop else 'no'}")
        return
    table = Table(title=f"{escape(name)} · {run.backend} · {plural(len(run.tokens), 'token')}", title_justify="left")
    for col, kw in (
        ("#", {"justify": "right"}),
        ("byte", {"justify": "right"}),
        ("token", {}),
        ("ok", {}),
        ("allowed", {"justify": "right"}),
        ("forced", {}),
        ("sample of allowed", {"overflow": "fold"}),
    ):
        table.add_column(col, **kw)
    for step in run.steps:
        b = step.before
        table.add_row(
            str(step.index),
            str(step.offset),
            escape(f"{token_text(vocab, step.token)} #{step.token}"),
            "[green]✓[/]" if step.allowed else "[red]✗[/]",
            str(b.n_allowed),
            escape(piece_text(b.forced)) if b.forced else "",
            escape(_sample(b, vocab)),
        )
    if run.steps:
        print_table(table)
    if run.note:
        out.print(f"note: {escape(run.note)}")
    if run.error is not None:
        out.print(
            f"[red]error[/]: the {run.backend} matcher failed before token {len(run.steps)}: {escape(run.error)}; "
            "its mask says nothing about TEXT"
        )
    elif run.rejection is not None:
        r = run.rejection
        out.print(
            f"[red]rejected[/] at token {r.token_index} {escape(token_text(vocab, r.token))} (id {r.token}, "
            f"bytes {r.token_offset}-{r.token_offset + len(r.piece)} of TEXT); first bad byte: {r.byte_offset}"
            f"{_byte_at(run.text, r.byte_offset)}"
        )
        out.print(f"  allowed there: {plural(r.allowed.n_allowed, 'token')}: {escape(_sample(r.allowed, vocab))}")
        if r.next_bytes == "[]":
            out.print("  no byte may follow: the text must end there" if r.can_stop_at_byte else "  no byte may follow")
        else:
            out.print(f"  next byte must be one of {escape(r.next_bytes)}")
        if r.note:
            out.print(f"  note: {escape(r.note)}")
        if run.refused_valid is not None:
            out.print(f"  note: {escape(run.refused_valid)}")
    elif run.end.can_stop:
        out.print("[green]accepted[/]: the text is a complete match (the grammar can stop here)")
        if run.independent is not None and run.independent.valid is False:
            out.print(
                f"[yellow]warning[/]: {run.backend}'s grammar takes TEXT, but it breaks the constraint "
                f"({run.independent.validated_by}): {escape(run.independent.errors[0])}; `sgcli lint` names the "
                "keywords a backend leaves to sgcli's checker"
            )
    else:
        out.print(
            f"[yellow]prefix[/]: every token allowed, but the grammar cannot stop yet; "
            f"next: {plural(run.end.n_allowed, 'token')}: {escape(_sample(run.end, vocab))}"
        )
        if run.end.forced:
            out.print(f"  forced: {escape(piece_text(run.end.forced))}")
