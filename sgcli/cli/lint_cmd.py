"""`sgcli lint`: ruff-like diagnostics for grammar, regex and JSON Schema files."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated, Optional

import typer

from sgcli.backends.bounded import each_on_its_own
from sgcli.backends.matching import refuse_unenforcing
from sgcli.cli import backend_options as bo
from sgcli.cli import constraint_options as co
from sgcli.cli.common import TOKENIZER_HELP, JsonFlagOpt, canonical_format, fail, plain_err
from sgcli.constraints.reading import read_text
from sgcli.constraints.spec import Kind
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UserError, did_you_mean, plural
from sgcli.grammar_dev.grammar_tests import KIND_ALIASES, parse_kind
from sgcli.lint import FORMATS, RENDERERS, Linter, LintOptions, Selection
from sgcli.lint.discover import expand
from sgcli.lint.render import statistics as render_statistics
from sgcli.lint.render import summary
from sgcli.lint.select import PerFileIgnores, silenced_by_noqa, unknown_selector

EXAMPLES = """
Examples:

  sgcli lint sgcli/grammars/*.gbnf

  sgcli lint schema.json --output-format full

  sgcli lint tool.lark --backend llguidance --output-format github

  sgcli lint answer.gbnf --tokenizer default --max-tokens 32

  sgcli lint schema.json --select J --ignore J002 --output-format json

  sgcli lint examples/reasoning_json.lark --sub answer=examples/answer.schema.json

  sgcli lint --regex '[0-9]{3}-[0-9]{4}' --backend outlines_core

  sgcli lint grammars/ --statistics          # a folder: the grammar files git does not ignore

  sgcli lint grammars/ --output-format sarif > sgcli.sarif

  sgcli rule J001

A finding is silenced on its line by `# noqa: G001` (GBNF/EBNF) or `// noqa: G001` (Lark).
"""


LintFormat = Enum("LintFormat", {f: f for f in FORMATS}, type=str)  # the shared names and lint's own


# The kinds --kind names: not none, nor choice, which lint takes by --choice (compile reads a file of lines).
LINTABLE_KINDS = [k for k in Kind if k not in (Kind.NONE, Kind.CHOICE)]


def _kind(value: str | None):
    if value is None:
        return None

    try:
        kind = parse_kind(value)
    except UserError:
        kind = Kind.NONE
    if kind not in LINTABLE_KINDS:
        names = [k.value for k in LINTABLE_KINDS]
        aliases = [a for a, k in KIND_ALIASES.items() if k in LINTABLE_KINDS]
        raise UserError(
            f"--kind {value}: not a kind of file sgcli can lint." + did_you_mean(value, [*names, *aliases]),
            hint="one of: " + ", ".join(names) + " (or " + ", ".join(aliases) + ")",
        )
    return kind


def _codes_opt(flag: str, help: str):
    """--select / --ignore: rule codes or prefixes, comma-separated and repeatable, or from SGCLI_LINT_<FLAG>."""
    envvar = "SGCLI_LINT_" + flag.removeprefix("--").upper()
    return Annotated[Optional[list[str]], typer.Option(flag, envvar=envvar, help=help, parser=_known_codes)]


def _known_codes(value: str) -> str:
    """One --select/--ignore value, refused where it selects no rule (a file's or SGCLI_LINT_*'s too)."""
    why = unknown_selector(value)
    if why is not None:
        raise typer.BadParameter(why + " See `sgcli rule --all` for the codes.")
    return value


SelectOpt = _codes_opt("--select", "Rule codes or prefixes to run (comma-separated, repeatable; ALL for every rule).")
IgnoreOpt = _codes_opt("--ignore", "Rule codes or prefixes to skip (the more specific of --select/--ignore wins).")


FilesArg = Annotated[
    Optional[list[str]],
    typer.Argument(
        metavar="PATH",
        help="Files or folders to lint; kind from the extension (.gbnf .ebnf .lark .regex .json) or --kind. "
        "In folders: *.gbnf *.ebnf *.lark *.regex and *.json JSON Schemas that git does not ignore (other JSON "
        "is named and left out). Or a constraint flag.",
    ),
]
BackendsOpt = Annotated[
    Optional[list[bo.SeveralBackends]],
    bo.backends_option(
        "'auto' (the default): the backend `generate` would use (its --backend auto: the first of llguidance, "
        "xgrammar, outlines_core that is installed, supports the file and compiles it); 'all': every installed "
        "backend that supports the file's kind; or a backend by name.",
    ),
]
TokenizerOpt = Annotated[
    Optional[str],
    typer.Option(
        "--tokenizer",
        help="Compile against this tokenizer and run the T and L rules: " + TOKENIZER_HELP + " Without it, "
        "backends compile against a 256-byte vocabulary.",
    ),
]
MaxTokensOpt = Annotated[
    Optional[int],
    typer.Option(
        "--max-tokens", help="Report (L001) when the shortest output needs more tokens than this; needs --tokenizer."
    ),
]
FormatOpt = Annotated[
    LintFormat,
    typer.Option(
        "--output-format",
        help="concise (the default; alias text), full (with the source line), json, json-lines (alias jsonl), "
        "github (workflow commands) or sarif (SARIF 2.1.0).",
        envvar="SGCLI_LINT_OUTPUT_FORMAT",
    ),
]
KindOpt = Annotated[
    Optional[str],
    typer.Option(
        "--kind",
        help="Kind instead of the extension's: "
        + ", ".join(k.value for k in LINTABLE_KINDS)
        + f" (also {', '.join(KIND_ALIASES)}); a choice is linted with --choice.",
    ),
]
ExitZeroOpt = Annotated[
    bool, typer.Option("--exit-zero", help="Exit 0 even when there are findings (2 still means bad input).")
]
StatisticsOpt = Annotated[
    bool, typer.Option("--statistics", help="Print how many findings each rule has, instead of each finding.")
]


@co.takes_constraint()
def lint(
    files: FilesArg = None,
    backend: BackendsOpt = None,
    tokenizer: TokenizerOpt = None,
    max_tokens: MaxTokensOpt = None,
    output_format: FormatOpt = LintFormat.concise,
    json_out: JsonFlagOpt = False,
    select: SelectOpt = None,
    ignore: IgnoreOpt = None,
    kind: KindOpt = None,
    exit_zero: ExitZeroOpt = False,
    statistics: StatisticsOpt = False,
    flags: co.ConstraintFlags = None,
) -> None:
    """Find a grammar's mistakes before a model runs, with ruff-like diagnostics.

    Each diagnostic has a rule code (S syntax/compile, G structure, W whitespace, J JSON
    Schema enforcement, R regex features, T tokenizer, L length), file:line:col, a
    message, and a fix hint where one exists. `sgcli rule CODE` explains a rule.

    Exit codes: 0 clean, 1 findings, 2 bad usage or an unreadable file.
    """

    output_format = _format(output_format, json_out)
    if statistics and output_format in ("github", "sarif"):
        raise UserError(
            f"--statistics prints counts per rule, which --output-format {output_format} has no place for",
            hint="--statistics with --output-format concise, json or json-lines",
        )
    names = bo.chosen(backend, "auto")  # each name already checked against the registry (exit 2 naming them)
    refuse_unenforcing(names)  # `none` judges nothing: "All checks passed" would be a claim of no checks
    options = LintOptions(
        backend=next((w for w in ("all", "auto") if w in names), tuple(names)),
        tokenizer=tokenizer,
        max_tokens=max_tokens,
        kind=_kind(kind),
        selection=Selection.parse(select, ignore),
        json_options=flags.layout(),
        subs=tuple(flags.sub or ()),
    )

    if not files and not flags.given():
        raise co.no_grammar()
    not_schemas: list[tuple[str, str]] = []  # JSON data in the folders: said, and counted in the summary
    targets = [*expand(files or [], not_schemas), *([flags.spec()] if flags.given() else [])]  # a flag's: as generate's
    for path, why in not_schemas:
        plain_err(f"note: {path}: not linted, {why}; name the file to lint it")
    if not targets:
        raise UserError("no grammar files to lint", hint="name files, or folders holding " + _SUFFIXES)
    with each_on_its_own(len(targets) > 1 or options.backend == "all" or len(names) > 1):  # a limit ends one file
        diagnostics, sources, failed = _lint_files(Linter(options), targets)
    diagnostics = _without_silenced(diagnostics, sources)
    if statistics:
        sys.stdout.write(render_statistics(diagnostics, output_format))
    else:
        sys.stdout.write(RENDERERS[output_format](diagnostics, sources))
    sys.stdout.flush()
    if output_format in ("concise", "full") or (statistics and output_format not in ("json", "json-lines")):
        plain_err(summary(diagnostics, len(targets) - failed, failed, skipped=len(not_schemas)))
    if failed:
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(EXIT_FINDINGS if diagnostics and not exit_zero else EXIT_OK)


def _format(output_format: LintFormat, json_out: bool) -> str:
    """--output-format (a name its Enum took, made canonical), with --json as its alias for JSON Lines
    (one diagnostic a line)."""
    given, output_format = output_format.value, canonical_format(output_format.value)
    if json_out:
        if output_format not in ("concise", "json-lines"):
            raise UserError(f"--json conflicts with --output-format {given}", hint="give one of them")
        output_format = "json-lines"
    return output_format


def _lint_files(linter, targets: list) -> tuple[list, dict[str, str | None], int]:
    """Lint each file (or a flag's spec); an unreadable one is reported and counted, never the end of the run."""
    diagnostics, sources, failed = [], {}, 0
    skipped: dict[tuple[str, str], int] = {}
    missing: dict[str, str] = {}
    for target in targets:
        try:
            result = linter.lint(target) if isinstance(target, str) else linter.lint_spec(target)
        except UserError as exc:  # unreadable file, unknown extension, unsupported backend
            fail(exc)
            failed += 1
            continue
        diagnostics += result.diagnostics
        for note in result.notes:
            plain_err(f"note: {note}")
        for key in result.skipped:
            skipped[key] = skipped.get(key, 0) + 1
        missing.update(result.missing)
        sources[result.path] = _source(result.path)
    for (name, reason), count in skipped.items():
        plain_err(f"note: {name} did not run on {plural(count, 'file')}: {reason}")
    if missing:  # named once, whatever the number of files: an install, not a finding
        plain_err("note: not installed, so not judged: " + "; ".join(f"{n} ({r})" for n, r in sorted(missing.items())))
    return diagnostics, sources, failed


def _source(path: str) -> str | None:
    """The file's text for the renderers, read again as boundedly as the linter read it."""
    if path == "-" or not os.path.isfile(path):  # stdin is read once; "<stdin>", "--regex" are no files
        return None
    try:
        return read_text(path)[0]
    except UserError:
        return None


_SUFFIXES = ".gbnf .ebnf .lark .regex .json (JSON Schemas)"
_COMMENTED = (".gbnf", ".ebnf", ".lark")  # grammar languages with comments, where a noqa comment can sit


def _without_silenced(diagnostics: list, sources: dict[str, str | None]) -> list:
    """Drop findings silenced by a `noqa` comment on their line or by lint.per-file-ignores."""
    from sgcli import config

    cfg = config.current()
    table = cfg.file_values.get("lint.per-file-ignores")
    per_file = PerFileIgnores.parse(table, str(cfg.path.parent) if cfg.path else None) if table else None
    kept = []
    for d in diagnostics:
        text = sources.get(d.path)
        if text is not None and d.line is not None and d.path.lower().endswith(_COMMENTED):
            lines = text.split("\n")
            if d.line <= len(lines) and silenced_by_noqa(d.code, lines[d.line - 1]):
                continue
        if per_file is not None and per_file.ignores(d.path, d.code):
            continue
        kept.append(d)
    return kept
