"""`sgcli test`: run grammar test files (cases that must be accepted or rejected) on backends."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from sgcli.backends import check_supports
from sgcli.backends.bounded import each_on_its_own
from sgcli.backends.matching import select_backends
from sgcli.cli import backend_options as bo
from sgcli.cli import constraint_options as co
from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, loading_note, out, output_format_of
from sgcli.cli.tables import print_table
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from sgcli.grammar_dev.grammar_tests import load_suite, run_suite
from sgcli.lint import preflight
from sgcli.tokenizers import load_tokenizer

EXAMPLES = """
Examples:

  sgcli test sgcli/grammars/json.test.yaml

  sgcli test sgcli/grammars/*.test.yaml --backend all --json

  sgcli test my_cases.yaml --backend llguidance --tokenizer HuggingFaceTB/SmolLM2-135M-Instruct
"""


@co.takes_constraint(kinds=False, generates=False)
def test(
    files: Annotated[list[str], typer.Argument(metavar="CASES.yaml", help="Grammar test files.")],
    backend: Annotated[
        Optional[list[bo.SeveralBackends]],
        bo.backends_option(
            "A backend, or 'all' (= 'auto', the default): every backend that supports the grammar's kind."
        ),
    ] = None,
    tokenizer: co.TokenizerOpt = None,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    flags: co.ConstraintFlags = None,
) -> None:
    """Check that a grammar accepts and rejects what its test file says, on every backend.

    Each input is checked as a whole string (fed byte by byte) and through real
    tokenizations (the tokenizer's own encoding and the greedy longest-match one, token
    by token against the mask).

    Exit codes: 0 every case passed, 1 some case failed or the grammar did not compile,
    2 malformed test file, bad flags, or a compile past --compile-timeout or --compile-memory
    (every other file and backend still runs).
    """

    suites = [load_suite(f) for f in files]  # a malformed file fails (exit 2) before any compile
    for suite in suites:  # the grammar is the test file's; layout and sub-grammars are the flags'
        suite.spec = flags.apply(suite.spec)
        # a rule that never ends (G011) runs no backend out of memory; one that does not compile fails its file
        preflight.structure_errors(suite.spec, ("G011",))
    names = select_backends(backend)
    if backend and not {"all", "auto"} & set(backend):  # named: each must take the grammar
        for suite in suites:
            for name in names:
                check_supports(name, suite.spec)  # exit 2, naming the backends that can
    vocab = load_tokenizer(tokenizer, progress=loading_note).vocab
    fmt = output_format_of(output_format, json_out, stream=True)
    writer = JsonRows(fmt)
    all_ok, limited = True, False
    for suite in suites:
        with each_on_its_own(len(suites) * len(names) > 1):  # a limit ends one file's backend, not the run
            report = run_suite(suite, names, vocab)
        all_ok &= report.ok
        limited |= any(b.status == "limit" for b in report.backends)
        if fmt != "text":  # one record per case and backend, then one per file
            _json(report, writer)
        else:
            _show(report)
    if fmt != "text":
        writer.close()
    raise typer.Exit(EXIT_USAGE if limited else EXIT_OK if all_ok else EXIT_FINDINGS)  # a limit: exit 2, as compile


def _json(report, writer) -> None:
    from sgcli import RECORD_SCHEMA_VERSION

    for o in report.outcomes:
        writer.write(
            {
                "schema_version": RECORD_SCHEMA_VERSION,
                "type": "case",
                "path": report.suite.path,
                "case": o.case.index + 1,
                "line": o.case.line,
                "description": o.case.description,
                "input": o.case.input,
                "accept": o.case.accept,
                "backend": o.backend,
                "passed": o.passed,
                "checked": o.checked,
                "problems": o.problems,
                "notes": o.notes,
                "independent": o.independent,
            }
        )
    writer.write(
        {
            "schema_version": RECORD_SCHEMA_VERSION,
            "type": "file",
            "path": report.suite.path,
            "kind": report.suite.spec.kind.value,
            "ok": report.ok,
            "backends": [
                {"backend": b.name, "status": b.status, "message": b.message, "cache": b.cache, "warnings": b.warnings}
                for b in report.backends
            ],
            "passed": sum(o.passed for o in report.outcomes),
            "failed": sum(not o.passed for o in report.outcomes),
        }
    )


def _show(report) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    suite = report.suite
    ran = [b.name for b in report.backends if b.status == "ran"]
    table = Table(title=f"{escape(suite.path)} · {suite.spec.kind.label}", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("case", overflow="fold")
    table.add_column("expect")
    for name in ran:
        table.add_column(name)
    by_key = {(o.case.index, o.backend): o for o in report.outcomes}
    for case in suite.cases:
        label = case.description or _short(case.input)
        cells = ["[green]pass[/]" if by_key[(case.index, n)].passed else "[red]FAIL[/]" for n in ran]
        table.add_row(str(case.index + 1), Text(label), "accept" if case.accept else "reject", *cells)
    print_table(table)
    for b in report.backends:
        for w in b.warnings:  # a case may fail for a keyword the backend ignored: say so, as `masks` does
            out.print(f"{escape(suite.path)}: [yellow]warning[/]: {b.name}: {escape(w)}")
        if b.status in ("error", "limit"):
            out.print(f"[red]error[/]: {b.name}: {escape(b.message or '')}")
        elif b.status != "ran":
            out.print(f"[dim]skipped {b.name}: {b.status}: {escape(b.message or '')}[/]")
    for o in report.outcomes:
        if not o.passed:
            where = f"{suite.path}:{o.case.line}" if o.case.line else suite.path
            out.print(Text(f"{where}: case {o.case.index + 1} failed on {o.backend}: input {_short(o.case.input, 60)}"))
            for problem in o.problems:
                out.print(f"  {escape(problem)}")
            if o.independent:
                out.print(f"  note: {escape(o.independent)}")
    noted = [o for o in report.outcomes if o.notes]
    if noted:
        out.print(
            f"[dim]{len(noted)} case run(s) took tokens the mask forbids (the backend steers decoding to "
            f"another tokenization; see --json for each):[/]"
        )
        for o in noted[:3]:
            out.print(f"[dim]  case {o.case.index + 1} on {o.backend}: {escape(o.notes[0])}[/]")
    out.print(_verdict(report, ran))


def _verdict(report, ran: list[str]) -> str:
    """The summary line, naming a backend that did not compile the grammar first: "FAILED: 2/2 case runs
    passed on llguidance" alone read as a contradiction when xgrammar's compile was what failed."""
    from rich.markup import escape

    stopped = {"error": "did not compile the grammar", "limit": "ran past a compile limit"}
    why = [f"{b.name} {stopped[b.status]}" for b in report.backends if b.status in stopped]
    passed = sum(o.passed for o in report.outcomes)
    counted = f"{passed}/{len(report.outcomes)} case runs passed on {', '.join(ran) or 'no backend'}"
    verdict = "[green]ok[/]" if report.ok else "[red]FAILED[/]"
    return f"{verdict}: {escape('; '.join([*why, counted]))}"


def _short(text: str, limit: int = 40) -> str:
    """A case's input as a JSON string, with what a terminal would not show visibly escaped too (DEL, C1
    controls, U+2028/U+2029 line breaks, format characters: a raw U+2028 broke the table's row)."""
    import json
    import unicodedata

    hidden = ("Cc", "Cf", "Zl", "Zp")
    shown = "".join(
        f"\\u{ord(c):04x}" if c == "\x7f" or (not c.isascii() and unicodedata.category(c) in hidden) else c
        for c in json.dumps(text, ensure_ascii=False)
    )
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
