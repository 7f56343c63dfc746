"""`sgcli convert`: translate a grammar to another notation and check the two agree."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from sgcli.backends.conversions import printed_by
from sgcli.backends.guarantee import printed_weaker_error
from sgcli.cli import constraint_options as co
from sgcli.cli.coercion import plain
from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, err, json_line, loading_note, out, output_format_of
from sgcli.dialects.convert import TARGETS
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError
from sgcli.grammar_dev.convert import convert_spec, llama_cpp_refusals, refuse_unreadable, round_trip, sibling_cases
from sgcli.grammar_dev.grammar_tests import load_suite

EXAMPLES = """
Examples:

  sgcli convert sgcli/grammars/json.gbnf --to lark > json.lark

  sgcli convert sgcli/grammars/csv.lark --to gbnf

  sgcli convert sgcli/grammars/iso8601.regex --to gbnf

  sgcli convert schema.json --to lark --cases schema.test.yaml --samples 50
"""


FileArg = Annotated[
    str,
    typer.Argument(
        metavar="FILE",
        help="GBNF or xgrammar EBNF (.gbnf/.ebnf), Lark (.lark), regex (.regex) or JSON Schema (.json), or @name.",
    ),
]
Target = Enum("Target", {n: n for n in TARGETS}, type=str)  # --to's choices: --help, completion, did-you-mean
ToOpt = Annotated[
    Target,
    typer.Option(
        "--to", case_sensitive=False, callback=plain, help="Target notation: lark or gbnf (ebnf is the same)."
    ),
]
OutputOpt = Annotated[
    Optional[Path], typer.Option("--output", "-o", help="Write the converted grammar here instead of stdout.")
]
CasesOpt = Annotated[
    Optional[str],
    typer.Option(
        "--cases",
        help="A grammar test file whose inputs both grammars must agree on. "
        "Default: <name>.test.yaml beside FILE, if any.",
    ),
]
SamplesOpt = Annotated[
    int,
    typer.Option("--samples", help="Random strings to sample from each grammar for the round-trip check (0 = none)."),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for the random walks.")]
NoCheckOpt = Annotated[bool, typer.Option("--no-check", help="Skip the round-trip check.")]


@co.takes_constraint(kinds=False, subgrammars=False, guarantee=True)
def convert(
    file: FileArg,
    to: ToOpt,
    output: OutputOpt = None,
    cases: CasesOpt = None,
    samples: SamplesOpt = 20,
    seed: SeedOpt = 0,
    tokenizer: co.TokenizerOpt = None,  # the vocabulary the random walks step over
    no_check: NoCheckOpt = False,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    flags: co.ConstraintFlags = None,
) -> None:
    """Convert between GBNF and Lark, or a regex or JSON Schema to either, and check the round trip.

    The check compiles both grammars on each backend that takes both and feeds each
    one strings the other accepts (random walks, and the cases of a test file). A JSON
    Schema is printed by xgrammar's translator (the only backend that prints one), in the
    JSON layout generate compiles (compact unless a JSON-layout flag says), with an object that
    says nothing of other keys closed to the keys it lists, as generate closes it (fewer texts
    than the schema allows, never an invalid one; README, "Objects"), and compared on
    xgrammar; a keyword its grammar does not enforce (sgcli's schema checker does, while
    generating, but a grammar file carries none) is exit 2 naming it, unless --allow-unenforced.
    What the target cannot express (a lookahead, %json, @name, %ignore) is exit 2, naming
    the construct and its line:col.

    Exit codes: 0 converted and the round trip agrees, 1 the round trip found a
    difference (or could not check anything, or one direction got no samples), 2 bad input or flags.
    """

    if samples < 0:
        raise UserError("--samples must be 0 or more")
    source = _source(flags, file).for_generation()  # a schema prints as generate compiles it (strict_mode)
    target, lost = convert_spec(source, to)
    via = printed_by(source)
    if lost and not flags.allow_unenforced:
        raise printed_weaker_error(source, via, lost)
    for refusal in llama_cpp_refusals(target):
        err.print(f"warning: the printed GBNF at {refusal}", markup=False, highlight=False)
    case_file, case_list = (cases, load_suite(cases).cases) if cases else sibling_cases(source.origin)
    report = None
    if no_check:
        refuse_unreadable(source, only=via)
    else:
        from sgcli.cli.progress import stage_progress
        from sgcli.tokenizers import load_tokenizer

        with stage_progress("round trip") as progress:
            progress("loading the tokenizer", 0, 1)
            vocab = load_tokenizer(tokenizer, progress=loading_note).vocab
            report = round_trip(
                source, target, vocab, samples=samples, seed=seed, cases=case_list, only=via, progress=progress
            )
    if output is not None:
        try:
            output.write_text(target.text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {output}: {exc.strerror}") from None
    if output_format_of(output_format, json_out) != "text":
        json_line(_record(source, target, via, case_file, report, lost))
    else:
        if output is None:
            out.print(target.text.rstrip("\n"), markup=False, highlight=False)
        if via:
            err.print(f"[dim]grammar text printed by {via}'s JSON Schema translator[/]")
        for gap in lost:
            err.print(f"[yellow]warning[/]: --allow-unenforced: the printed grammar does not enforce {gap.describe()}")
        if report is not None:
            _show(report, case_file)
    raise typer.Exit(EXIT_OK if report is None or report.ok else EXIT_FINDINGS)


def _source(flags, file: str):
    """The FILE to convert; its dialect comes from its extension alone (convert has no kind flags)."""
    if file == "-":
        raise UserError(
            "convert does not read stdin ('-'): it takes the dialect from the file's extension",
            hint="save the grammar to a file named .gbnf/.ebnf, .lark, .regex or .json",
        )
    try:
        return flags.file_spec(file)
    except UserError as exc:
        if not exc.message.startswith("cannot tell the grammar kind"):
            raise
        hint = "convert reads the dialect from the extension: name the file .gbnf/.ebnf, .lark, .regex or .json"
        raise UserError(exc.message, location=exc.location, hint=hint) from None


def _record(source, target, via: str | None, case_file: str | None, report, lost: list) -> dict:
    """The conversion as one JSON record (and its round trip, when checked)."""
    from sgcli import RECORD_SCHEMA_VERSION

    record = {  # sgcli/records/ Conversion
        "schema_version": RECORD_SCHEMA_VERSION,
        "source": source.name,
        "from": source.kind.value,
        "to": target.kind.value,
        "text": target.text,
        "printed_by": via or "sgcli",
        "unenforced": [g.record() for g in lost],
        "cases_file": case_file,
    }
    if report is not None:
        record["round_trip"] = {
            "ok": report.ok,
            "checked": report.checked,
            "backends": report.backends,
            "failures": report.failures,
            "notes": report.notes,
        }
    return record


def _show(report, case_file: str | None) -> None:
    from rich.markup import escape

    counts = ", ".join(f"{n} {what}" for what, n in report.checked.items())
    where = f"compared on {', '.join(report.backends) or 'no backend'}"
    if case_file:
        err.print(f"[dim]cases from {escape(case_file)}[/]")
    for note in report.notes:
        err.print(f"[yellow]note[/]: {escape(note)}")
    for failure in report.failures[:20]:
        err.print(f"[red]✗[/] {escape(failure)}")
    if len(report.failures) > 20:
        err.print(f"  … and {len(report.failures) - 20} more")
    if report.ok:
        verdict = "[green]round trip ok[/]"
    elif report.failures:
        verdict = "[red]round trip FAILED[/]"
    else:  # nothing compared: not a failure of the conversion, and not a pass either
        verdict = "[red]round trip NOT VERIFIED[/]"
    err.print(f"{verdict}: {counts} ({where})")
