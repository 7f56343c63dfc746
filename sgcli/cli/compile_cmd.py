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
from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, err, out, output_format_of
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
    unreadable file, or a keyword nothing would enforce.
    """

    chosen_kind = parse_kind(kind) if kind else None
    names = select_backends(backend)
    # bad input: exit 2 before any compile. Compiled as generate compiles (xgrammar's strict_mode), so
    # --print shows generate's grammar and the cache entry is the one generate reads.
    specs = [spec.for_generation() for spec in flags.specs(files, chosen_kind)]
    vocab = load_tokenizer(tokenizer).vocab
    with each_on_its_own(len(specs) * len(names) > 1):  # a limit ends one row, not the run
        rows = [compile_row(spec, name, vocab) for spec in specs for name in names]
    fmt = output_format_of(output_format, json_out, stream=True)
    if fmt != "text":
        writer = JsonRows(fmt)
        for row in rows:
            writer.write({k: v for k, v in row.items() if (k != "normalized" or print_grammar) and k != "refusal"})
        writer.close()
    else:
        _show(rows, print_grammar)
    raise typer.Exit(_exit_code(rows, flags.allow_unenforced))


def _exit_code(rows: list[dict], allow_unenforced: bool) -> int:
    """1 where a grammar failed to compile; 2 where no backend could, a compile limit was hit, or a keyword
    nothing enforces was not allowed (each such refusal said on stderr)."""
    if not any(r["status"] in ("ok", "error") for r in rows):
        err.print("[bold red]error[/]: no chosen backend can compile these files (see the rows above)")
        return EXIT_USAGE
    if any(r.get("limit") for r in rows):
        return EXIT_USAGE  # a compile limit is the user's to raise, like bad input
    refusals = [r["refusal"] for r in rows if r.get("refusal")]
    if refusals and not allow_unenforced:
        from rich.markup import escape

        for refusal in refusals:
            err.print(escape(refusal.render()), highlight=False)
        return EXIT_USAGE
    return EXIT_FINDINGS if any(r["status"] == "error" for r in rows) else EXIT_OK


def compile_row(spec, name: str, vocab) -> dict:
    """One report row: status ok | error | unsupported | unavailable, with the details."""

    impl = get_backend(name)
    from sgcli import RECORD_SCHEMA_VERSION

    row: dict = {"schema_version": RECORD_SCHEMA_VERSION, "path": spec.name, "kind": spec.kind.value, "backend": name}
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
        loc = exc.location
        return row | {
            "status": "error",
            "message": exc.message,
            "hint": exc.hint,
            "location": str(loc) if loc else spec.name,
            "line": loc.line if loc else None,
            "col": loc.col if loc else None,
            "compile_ms": round((time.perf_counter() - t) * 1000, 2),
            "limit": getattr(exc, "flag", None),  # a compile limit: the flag that raises it
        }
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
        if r["status"] == "error":
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
