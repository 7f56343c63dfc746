"""`sgcli compile`: compile grammar files with one or every backend and report how it went."""

from __future__ import annotations

import re
import time
from typing import Annotated, Optional

import typer

from sgcli.backends import get_backend, unsupported_reason
from sgcli.backends.bounded import each_on_its_own
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.guarantee import unenforced_error
from sgcli.backends.keyword_coverage import compiled_gaps, unchecked
from sgcli.backends.matching import backends_for, select_backends
from sgcli.cli import backend_options as bo
from sgcli.cli import constraint_options as co
from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, err, fail, loading_note, out, output_format_of
from sgcli.cli.tables import print_table
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, UserError
from sgcli.grammar_dev.grammar_tests import parse_kind
from sgcli.tokenizers import load_tokenizer

EXAMPLES = """
Examples:

  sgcli compile sgcli/grammars/json.gbnf

  sgcli compile @sql @iso8601 --backend all

  sgcli compile schema.json --print --backend llguidance

  sgcli compile broken.gbnf --json

  sgcli compile --schema s.json --whitespace-pattern '[ ]{0,2}' --backend all
"""

_RULE_LINE = re.compile(r"^\s*[A-Za-z_][\w.-]*\s*(::=|:)", re.M)


FilesArg = Annotated[
    Optional[list[str]],
    typer.Argument(
        metavar="FILE", help="Grammar files (kind from extension) or @name from sgcli/grammars/; or a flag."
    ),
]
BackendsOpt = Annotated[
    Optional[list[bo.SeveralBackends]],
    bo.backends_option("A backend, or 'all' (= 'auto', the default): every backend that enforces grammars."),
]
KindOpt = Annotated[
    Optional[str],
    typer.Option(
        "--kind",
        help="Grammar kind instead of the extension's: json_schema, regex, ebnf, lark, choice (one a line), ...",
    ),
]
PrintOpt = Annotated[bool, typer.Option("--print", help="Print the normalized grammar each backend compiled.")]


@co.takes_constraint(guarantee=True)
def compile_files(
    files: FilesArg = None,
    backend: BackendsOpt = None,
    tokenizer: co.TokenizerOpt = None,
    kind: KindOpt = None,
    print_grammar: PrintOpt = False,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    flags: co.ConstraintFlags = None,
) -> None:
    """Compile grammar files with each backend: errors at file:line:col, time, size, cache.

    Per file and backend: ok, error (with file:line:col), or unsupported (naming the
    backends that can); compile time in ms, grammar size, and whether the on-disk cache
    of compiled grammars was hit.

    JSON Schema keywords a backend's grammar leaves to sgcli's schema checker are listed per
    row; one that nothing enforces is exit 2, naming it at file:line:col, unless --allow-unenforced.

    Exit codes: 0 all compiled, 1 some grammar failed to compile, 2 bad usage, an
    unreadable or invalid file (its rows say error; every other file still compiles), or a
    keyword nothing would enforce.
    """

    chosen_kind = parse_kind(kind) if kind else None
    names = select_backends(backend)
    # a bad file is its rows' error (exit 2), the others compile. Compiled as generate compiles (xgrammar's
    # strict_mode), so --print shows generate's grammar and the cache entry is the one generate reads.
    specs = [s if isinstance(s, co.BadInput) else s.for_generation() for s in flags.specs(files, chosen_kind)]
    good = [s for s in specs if not isinstance(s, co.BadInput)]
    vocab = (
        load_tokenizer(tokenizer, progress=loading_note).vocab if good else None
    )  # every file bad: exit 2 before anything loads
    with each_on_its_own(len(specs) * len(names) > 1):  # a limit ends one row, not the run
        rows = [
            _bad_input_row(spec, name) if isinstance(spec, co.BadInput) else compile_row(spec, name, vocab)
            for spec in specs
            for name in names
        ]
    fmt = output_format_of(output_format, json_out, stream=True)
    if fmt != "text":
        writer = JsonRows(fmt)
        for row in rows:
            writer.write({k: v for k, v in row.items() if (k != "normalized" or print_grammar) and k not in _OWN})
        writer.close()
    elif good:  # every file bad: their errors alone, as before any compile
        _show(rows, print_grammar)
    raise typer.Exit(_exit_code(rows, flags.allow_unenforced))


_OWN = ("refusal", "bad_input")  # what a row carries for the exit code, not for its record


def _exit_code(rows: list[dict], allow_unenforced: bool) -> int:
    """1 where a grammar failed to compile; 2 where a file was unreadable or invalid, no backend could
    compile, a compile limit was hit, or a keyword nothing enforces was not allowed (each such refusal
    and bad file said on stderr)."""
    bad = list(dict.fromkeys(r["bad_input"] for r in rows if r.get("bad_input")))  # once, not once per backend
    for exc in bad:
        fail(exc)  # as lint says a file it cannot read
    compiled = [r for r in rows if not r.get("bad_input")]
    if compiled and not any(r["status"] in ("ok", "error") for r in compiled):
        err.print("[bold red]error[/]: no chosen backend can compile these files (see the rows above)")
        return EXIT_USAGE
    refusals = [r["refusal"] for r in rows if r.get("refusal")]
    if refusals and not allow_unenforced:
        from rich.markup import escape

        for refusal in refusals:
            err.print(escape(refusal.render()), highlight=False)
        return EXIT_USAGE
    if bad or any(r.get("limit") for r in rows):
        return EXIT_USAGE  # bad input, or a compile limit: the user's to raise
    return EXIT_FINDINGS if any(r["status"] == "error" for r in rows) else EXIT_OK


def _row(path: str, kind: str | None, name: str) -> dict:
    from sgcli import RECORD_SCHEMA_VERSION

    return {"schema_version": RECORD_SCHEMA_VERSION, "path": path, "kind": kind, "backend": name}


def _error(exc: UserError, where: str) -> dict:
    """A row's error: the message, hint and place of `exc` (`where` where it names none)."""
    loc = exc.location
    return {
        "status": "error",
        "message": exc.message,
        "hint": exc.hint,
        "location": str(loc) if loc else where,
        "line": loc.line if loc else None,
        "col": loc.col if loc else None,
    }


def _bad_input_row(bad: co.BadInput, name: str) -> dict:
    """The row of a file that could not be read as a grammar, on backend `name`: its error, no compile."""
    return (
        _row(bad.path, bad.kind.value if bad.kind else None, name)
        | _error(bad.error, bad.path)
        | {"bad_input": bad.error}
    )


def compile_row(spec, name: str, vocab) -> dict:
    """One report row: status ok | error | unsupported | unavailable, with the details."""

    impl = get_backend(name)
    row = _row(spec.name, spec.kind.value, name)
    reason = unsupported_reason(impl, spec)
    if reason is not None:
        return row | {
            "status": "unsupported",
            "message": f"{name} does not support {reason}",
            "backends_that_can": backends_for(spec),
        }
    missing = impl.unavailable_reason()
    if missing:
        return row | {"status": "unavailable", "message": missing}
    t = time.perf_counter()
    try:
        outcome = compile_cached(impl, spec, vocab)
    except UserError as exc:
        return (
            row
            | _error(exc, spec.name)
            | {
                "compile_ms": round((time.perf_counter() - t) * 1000, 2),
                "limit": getattr(exc, "flag", None),  # a compile limit: the flag that raises it
            }
        )
    compiled = outcome.settled().compiled  # the record says whether it was stored
    gaps = compiled_gaps(compiled)
    nothing = unchecked(gaps)
    size: dict = {}
    if compiled.normalized is not None:
        size = {"rules": len(_RULE_LINE.findall(compiled.normalized)), "normalized_chars": len(compiled.normalized)}
    size |= compiled.size_info()
    return row | {
        "status": "ok",
        "compile_ms": round(compiled.compile_s * 1000, 2),
        "cache": outcome.status,
        "cache_reason": outcome.reason,
        "size": size,
        "warnings": list(dict.fromkeys(w.message for w in compiled.warnings)),  # one per message, not per place
        "normalized": compiled.normalized,
        "checked": [g.describe() for g in gaps if g.checker],
        "unenforced": [g.describe() for g in nothing],
        "refusal": unenforced_error(spec, name, nothing) if nothing else None,
    }


def _size_text(size: dict) -> str:
    parts = []
    if size.get("rules"):
        parts.append(f"{size['rules']} rules")
    elif "normalized_chars" in size:
        parts.append(f"{size['normalized_chars']} chars")
    if "memory_size_bytes" in size:
        parts.append(f"{size['memory_size_bytes'] / 1024:.1f} KiB")
    parts += [f"{k}={v}" for k, v in size.items() if k not in ("rules", "normalized_chars", "memory_size_bytes")]
    return ", ".join(parts) or "-"


def _show(rows: list[dict], print_grammar: bool) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title_justify="left")
    for col in ("file", "backend", "status", "ms", "size", "cache"):
        table.add_column(col, justify="right" if col == "ms" else "left")
    colors = {"ok": "green", "error": "red", "unsupported": "yellow", "unavailable": "yellow"}
    for r in rows:
        ms = f"{r['compile_ms']:.1f}" if "compile_ms" in r else ""
        table.add_row(
            escape(r["path"]),
            r["backend"],
            f"[{colors[r['status']]}]{r['status']}[/]",
            ms,
            _size_text(r.get("size", {})),
            r.get("cache", ""),
        )
    print_table(table)
    for r in rows:  # details as plain lines: greppable, never wrapped inside a table cell
        if r["status"] == "error" and not r.get("bad_input"):  # a bad file's error: on stderr, once
            out.print(f"{escape(r['location'])}: error: {r['backend']}: {escape(r['message'])}")
            if r.get("hint"):
                out.print(f"  hint: {escape(r['hint'])}")
        elif r["status"] == "unsupported":
            can = ", ".join(r["backends_that_can"]) or "no installed backend"
            out.print(f"{escape(r['path'])}: unsupported: {escape(r['message'])}; backends that can: {can}")
        elif r["status"] == "unavailable":
            err.print(f"{escape(r['path'])}: {r['backend']} unavailable: {escape(r['message'])}")
        for w in r.get("warnings", []):
            out.print(f"{escape(r['path'])}: warning: {r['backend']}: {escape(w)}")
        if r.get("checked"):
            listed = ", ".join(r["checked"])
            out.print(f"{escape(r['path'])}: note: {r['backend']}: sgcli's schema checker enforces {escape(listed)}")
    if print_grammar:
        for r in rows:
            if r["status"] == "ok" and r.get("normalized"):
                out.print(f"\n# {escape(r['path'])} · {r['backend']}")
                out.print(escape(r["normalized"].rstrip("\n")))
            elif r["status"] == "ok":
                out.print(f"\n# {escape(r['path'])} · {r['backend']}: no normalized grammar text")
