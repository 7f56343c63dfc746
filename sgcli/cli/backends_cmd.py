"""`sgcli backends`: what each grammar backend can do, from the capabilities it declares."""

from __future__ import annotations

from typing import Annotated

import typer

from sgcli.backends import _OPTION_FLAGS, DEFAULT_BACKEND, backend_names, get_backend, listed_unavailable_reason
from sgcli.backends.auto import AUTO_ORDER
from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, out, output_format_of
from sgcli.cli.tables import print_table
from sgcli.constraints.spec import Kind
from sgcli.serving import engine_names, get_dialect
from sgcli.serving.base import ROUTES

EXAMPLES = """
Examples:

  sgcli backends

  sgcli backends --json | jq -r 'select(.kinds | index("lark")) | .backend'

  sgcli backends --engines            # what each serving engine (--engine) accepts
"""

KINDS_NOTE = (
    "kinds: the constraint kinds each one takes, as compile's --kind names them (lint's --kind takes all but "
    "choice, which lint takes by --choice); generate, compare-backends, lint, compile and masks take each by "
    "its own flag (--schema, --regex, --ebnf, --lark, --choice, --structural-tag), test by its test file's "
    "grammar: (a file, @name or {kind, text})"
)


def capability_rows() -> list[dict]:
    """One record per registered backend, in the registry's (and `auto`'s) order."""

    rows = []
    for name in backend_names():
        backend = get_backend(name)
        caps = backend.capabilities
        missing = listed_unavailable_reason(backend)  # no library imported: every column is metadata
        rows.append(
            {
                "backend": name,
                "available": missing is None,
                "version": backend.version() if missing is None else None,
                "unavailable_reason": missing,
                "description": backend.description,
                "kinds": [k.value for k in Kind if k in caps.kinds and k is not Kind.NONE],
                "json_options": [o for o in _OPTION_FLAGS if o in caps.json_options],
                "notes": caps.notes,
                "enforces": caps.enforces,
                "jump_forward": caps.jump_forward,
                "cacheable": caps.cacheable,
                "default": name == DEFAULT_BACKEND,
                "auto_rank": AUTO_ORDER.index(name) + 1 if name in AUTO_ORDER else None,
            }
        )
    return rows


def engine_rows() -> list[dict]:
    """One record per serving engine (`--engine`), from the capabilities its dialect declares."""

    rows = []
    for name in engine_names():
        dialect = get_dialect(name)
        caps = dialect.capabilities
        rows.append(
            {
                "engine": name,
                "description": dialect.description,
                "kinds": [k.value for k in Kind if k in caps.kinds and k is not Kind.NONE],
                "json_options": [o for o in _OPTION_FLAGS if o in caps.json_options],
                "routes": [ROUTES[r] for r in caps.routes],
                "raw_route": ROUTES[caps.raw_route] if caps.raw_route else None,
                "subgrammars": caps.subgrammars,
                "server_backends_per_request": bool(caps.server_backends),
                "notes": caps.notes,
            }
        )
    return rows


def backends(
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
    engines: Annotated[
        bool, typer.Option("--engines", help="List the serving engines (--engine) and what they accept instead.")
    ] = False,
) -> None:
    """List the grammar backends: version, constraint kinds, JSON layout options, notes.

    `--backend auto` tries them in the order shown by the 'auto' column.
    """
    rows = engine_rows() if engines else capability_rows()
    fmt = output_format_of(output_format, json_out, stream=True)
    if fmt != "text":
        from sgcli import RECORD_SCHEMA_VERSION

        writer = JsonRows(fmt)
        for row in rows:
            writer.write({"schema_version": RECORD_SCHEMA_VERSION} | row)  # sgcli/records/ BackendRow, EngineRow
        writer.close()
        return
    _engine_table(rows) if engines else _table(rows)


def _engine_table(rows: list[dict]) -> None:
    """Like the backends table: one item per line, the notes below, so it fits 80 columns."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="serving engines (--engine)", title_justify="left", show_lines=True)
    for column in ("engine", "kinds", "JSON options", "routes", "--raw route"):
        table.add_column(column, no_wrap=True)
    for r in rows:
        kinds = "\n".join(r["kinds"])
        options = "\n".join(_OPTION_FLAGS[o] for o in r["json_options"]) or "-"
        table.add_row(r["engine"], kinds, options, "\n".join(r["routes"]), r["raw_route"] or "-")
    print_table(table)
    out.print(KINDS_NOTE)
    for r in rows:
        out.print(f"[bold]{r['engine']}[/]: {escape(r['notes'])}")


def _table(rows: list[dict]) -> None:
    from rich.markup import escape
    from rich.table import Table

    # One item per line in the list columns, so cells break between items, never inside a word;
    # the notes (long prose) go below the table, where they wrap at word boundaries. Fits 80 columns.
    default = "" if any(r["default"] for r in rows) else f" (default: --backend {DEFAULT_BACKEND}, in the 'auto' order)"
    table = Table(title="grammar backends" + default, title_justify="left", show_lines=True)
    for column in ("backend", "version", "auto", "kinds", "JSON options"):
        table.add_column(column, no_wrap=True, justify="right" if column == "auto" else "left")
    missing = []
    for r in rows:
        name = r["backend"] + ("\n(default)" if r["default"] else "")
        version = r["version"] if r["available"] else "[red]missing[/]"
        if not r["available"]:
            missing.append(f"{r['backend']}: {r['unavailable_reason']}")
        kinds = "\n".join(Kind(k).value for k in r["kinds"])
        options = "\n".join(_OPTION_FLAGS[o] for o in r["json_options"]) or "-"
        table.add_row(name, version, str(r["auto_rank"] or "-"), kinds, options)
    print_table(table)
    out.print(KINDS_NOTE)
    for r in rows:
        if r["notes"]:
            out.print(f"[bold]{r['backend']}[/]: {escape(r['notes'])}")
    for line in missing:
        out.print(f"[red]missing[/] {escape(line)}")
