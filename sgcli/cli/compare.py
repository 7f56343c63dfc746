"""`sgcli compare-backends`: one constraint, several backends (and JSON layouts), side by side.

The flags become one `CompareRequest`, run by `sgcli.app.compare`; this module prints its
rows (a table, JSON or JSONL) and the summary. `--no-generate` loads no model: it compiles
against a tokenizer and times the masks (walking them along `--text` when given).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from sgcli.app.compare import (
    NO_LAYOUT,
    CompareRequest,
    check_some_row_runs,
    parse_variants,
    pick_backends,
    refuse_server_side,
    run_compare,
)
from sgcli.app.model import ModelOptions
from sgcli.backends.bounded import each_on_its_own
from sgcli.batch.sampling import SamplingParams
from sgcli.cli import backend_options as bo
from sgcli.cli import constraint_options as co
from sgcli.cli import engine_options as eo
from sgcli.cli import model_options as mo
from sgcli.cli.common import (
    TOKENIZER_HELP,
    JsonFlagOpt,
    JsonRows,
    OutputFormatOpt,
    err,
    out,
    output_format_of,
    sample_text,
    utf8_text,
)
from sgcli.cli.report import Terminal
from sgcli.cli.tables import print_table
from sgcli.constraints.spec import Kind
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError
from sgcli.lint import preflight

EXAMPLES = """
Examples:

  sgcli compare-backends --schema s.json "Describe Paris as JSON"

  sgcli compare-backends --schema s.json --whitespace flexible,compact,indent=2 "..." --json

  sgcli compare-backends --no-generate --schema s.json --text '{"name": "Paris"}'

  sgcli compare-backends -b llguidance -b outlines_core --regex '[0-9]{3}' "Pick a number"
"""

PromptArg = Annotated[
    Optional[str], typer.Argument(help="The prompt (not needed with --no-generate).", callback=utf8_text)
]
BackendsOpt = Annotated[
    Optional[list[bo.SeveralBackends]],
    bo.backends_option(
        "A backend to compare. Default ('all' = 'auto'): every installed backend that supports the constraint.",
        envvar=False,
    ),
]
BackendsCsvOpt = Annotated[
    Optional[str],
    typer.Option(
        "--backends",
        metavar="A,B",
        callback=bo.comma_names,
        help="Older spelling of --backend: names, comma-separated.",
    ),
]
WhitespaceOpt = Annotated[
    Optional[str],
    typer.Option(
        "--whitespace",
        help="JSON layout variants to compare, e.g. flexible,compact,indent=2,max-whitespace=4.",
        rich_help_panel="JSON layout",
    ),
]
NoGenerateOpt = Annotated[bool, typer.Option("--no-generate", help="Compile and time masks only; no model is loaded.")]
TextOpt = Annotated[
    Optional[str],
    typer.Option(
        "--text",
        help="With --no-generate: walk the masks along this sample output ('-': read it from stdin).",
        callback=utf8_text,
    ),
]
TokenizerRefOpt = Annotated[
    Optional[str],
    typer.Option("--tokenizer", help="Tokenizer for --no-generate: " + TOKENIZER_HELP + " Default: --model's."),
]


@co.takes_constraint(guarantee=True)
@eo.takes_engine(only=("engine", "base_url"))
@mo.takes_prompt()
@mo.takes_sampling(defaults={"max_tokens": 128})
@mo.takes_model()
def compare_backends(
    prompt: PromptArg = None,
    backends_opt: BackendsOpt = None,
    backends_csv: BackendsCsvOpt = None,
    whitespace: WhitespaceOpt = None,
    no_generate: NoGenerateOpt = False,
    text: TextOpt = None,
    tokenizer_ref: TokenizerRefOpt = None,
    model_flags: ModelOptions = None,
    sampling: SamplingParams = None,
    prompt_flags: mo.PromptFlags = None,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    engine_flags: eo.EngineFlags = None,
    flags: co.ConstraintFlags = None,
) -> None:
    """Run one constraint through several backends and compare compile time, mask time and output.

    Exit codes: 0 every row ran and is valid (or, with --no-generate, compiled and
    accepted --text), 1 some row failed, 2 bad input or flags, or no row can run
    (no chosen backend supports the constraint or a layout option), checked before anything loads.
    """
    engine_flags.check()
    if not engine_flags.local:
        flags.for_server()
    flags.one_stdin({"--text": text})
    spec = flags.spec()
    if not no_generate:  # generated as `generate` compiles it; --no-generate judges a given text
        spec = spec.for_generation()
    _check_flags(spec, prompt, whitespace=whitespace, no_generate=no_generate, text=text)
    text = sample_text(text)  # '-': stdin, unless the constraint was read from there
    preflight.structure_errors(spec)  # an undefined rule, or one that never ends (G011), before anything loads
    for group in (sampling, prompt_flags, model_flags):
        group.check()
    if not engine_flags.local:
        engine_flags.client()
        refuse_server_side(engine_flags.engine, spec, prompt_flags.raw)
    variants = parse_variants(whitespace, spec)
    names = pick_backends([*(backends_opt or []), *(backends_csv or [])], spec)
    check_some_row_runs(spec, names, variants)
    if tokenizer_ref is not None and not no_generate:
        raise UserError("--tokenizer is for --no-generate; a generation uses the model's own tokenizer")
    request = CompareRequest(
        spec,
        tuple(names),
        tuple(variants),
        prompt=prompt,
        no_generate=no_generate,
        text=text,
        tokenizer=tokenizer_ref,
        model=model_flags,
        sampling=sampling,
        prompt_options=prompt_flags.options(),
        allow_unenforced=flags.allow_unenforced,
    )
    with each_on_its_own(len(names) > 1 or len(variants) > 1):  # a limit ends one row, not the run
        rows = run_compare(request, Terminal())
    _report(rows, output_format_of(output_format, json_out, stream=True), no_generate=no_generate)


def _check_flags(spec, prompt, *, whitespace, no_generate: bool, text) -> None:
    """Flag combinations that make no sense, refused before anything loads."""
    if whitespace and spec.kind is not Kind.JSON_SCHEMA:
        raise UserError(
            f"--whitespace compares JSON layouts; this constraint is {spec.kind.label}",
            hint="drop --whitespace, or use --schema",
        )
    if text is not None and not no_generate:
        raise UserError("--text is for --no-generate", hint="add --no-generate, or drop --text")
    if not no_generate and prompt is None:
        raise UserError(
            "no prompt given", hint='sgcli compare-backends --schema s.json "your prompt", or --no-generate'
        )


def _report(rows: list[dict], fmt: str, *, no_generate: bool) -> None:
    """Rows to stdout (a table, JSON or JSONL), the summary to stderr, and the exit code."""
    failed = any(r["error"] and not r["skipped"] or r["valid"] is False for r in rows)
    if fmt == "text":
        _table(rows, no_generate)
    else:
        writer = JsonRows(fmt)
        for row in rows:
            writer.write(row)
        writer.close()
    _summary(rows)
    raise typer.Exit(EXIT_FINDINGS if failed else EXIT_OK)


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "[green]yes[/]" if value else "[red]no[/]"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(rows: list[dict], no_generate: bool) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        caption="times in ms; compile: a load from the on-disk cache where cache is hit; p50/p99: mask time "
        "per token, over the row's masks (one a token: under 100 of them, p99 is the largest)"
        + ("; allowed: tokens allowed first" if no_generate else ""),
        caption_justify="left",
    )
    variants = len({r["variant"] for r in rows}) > 1
    cols = ["backend"] + (["variant"] if variants else []) + ["compile", "cache", "p50", "p99"]
    cols += (
        ["steps", "allowed", "ok", "agree"]
        if no_generate
        else ["tokens", "tok/s", "finish", "valid", "agree", "output"]
    )
    for c in cols:
        table.add_column(c, overflow="fold", no_wrap=c != "output", min_width=10 if c == "output" else None)
    notes = []
    for r in rows:
        cells = [r["backend"]] + ([r["variant"]] if variants else [])
        if r["error"]:  # the status goes where the compile time would be; the message below the table
            notes.append(f"({len(notes) + 1}) {r['backend']} {r['variant']}: {r['error']}")
            status = "[yellow]skip[/]" if r["skipped"] else "[red]error[/]"
            cells += [f"{status} ({len(notes)})"] + ["-"] * (len(cols) - len(cells) - 1)
            table.add_row(*cells)
            continue
        cells += [_fmt(r["compile_ms"]), _fmt(r["cache"]), _fmt(r["mask_ms_p50"], 3), _fmt(r["mask_ms_p99"], 3)]
        if no_generate:
            ok = _fmt(r["valid"])
            if r["valid"] is False:  # where it stopped: a refused token, or the end of a prefix (as `masks` says)
                at = r.get("rejected_at_token")
                ok += " (prefix)" if at is None else f" (token {at})"
            cells += [_fmt(r["tokens"]), _fmt(r.get("allowed_first")), ok, _fmt(r["agree"])]
        else:
            output = r["output"] if len(r["output"]) <= 60 else r["output"][:57] + "..."
            cells += [
                _fmt(r["tokens"]),
                _fmt(r["tokens_per_s"], 1),
                _fmt(r["finish_reason"]),
                _fmt(r["valid"]),
                _fmt(r["agree"]),
                escape(output),
            ]
        table.add_row(*cells)
    print_table(table)
    for note in notes:
        out.print(escape(note))


def _summary(rows: list[dict]) -> None:
    from rich.markup import escape

    for r in rows:
        for w in r["warnings"]:
            err.print(f"[yellow]warning[/]: {r['backend']}{_of_variant(r['variant'])}: {escape(w)}")
    for variant in dict.fromkeys(r["variant"] for r in rows):
        ran = [r for r in rows if r["variant"] == variant and r["agree"] is not None]
        if len(ran) < 2:
            continue
        differ = [r["backend"] for r in ran if not r["agree"]]
        if differ:
            err.print(f"[yellow]differ[/]{_of_variant(variant)}: {', '.join(differ)} vs {ran[0]['backend']}")
        else:
            err.print(f"agree{_of_variant(variant)}: {', '.join(r['backend'] for r in ran)}")


def _of_variant(variant: str) -> str:
    """` (compact)` after a row's backend; nothing for a constraint no JSON layout shapes."""
    from rich.markup import escape

    return "" if variant == NO_LAYOUT else f" ({escape(variant)})"
