"""`sgcli backends`: what each grammar backend can do, from the capabilities it declares."""

from __future__ import annotations

from typing import Annotated

import typer

from sgcli.cli.common import json_line, out

EXAMPLES = """
Examples:

  sgcli backends

  sgcli backends --json | jq -r 'select(.kinds | index("lark")) | .backend'
"""


def capability_rows() -> list[dict]:
    """One record per registered backend, in the registry's (and `auto`'s) order."""
    from sgcli.backends import _OPTION_FLAGS, DEFAULT_BACKEND, backend_names, get_backend
    from sgcli.backends.auto import AUTO_ORDER
    from sgcli.constraints.spec import Kind

    rows = []
    for name in backend_names():
        backend = get_backend(name)
        caps = backend.capabilities
        missing = backend.unavailable_reason()
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


def backends(
    json_out: Annotated[bool, typer.Option("--json", help="One JSON record per backend (JSONL) on stdout.")] = False,
) -> None:
    """List the grammar backends: version, constraint kinds, JSON layout options, notes.

    `--backend auto` tries them in the order shown by the 'auto' column.
    """
    rows = capability_rows()
    if json_out:
        for row in rows:
            json_line(row)
        return
    _table(rows)


def _table(rows: list[dict]) -> None:
    from rich.table import Table

    from sgcli.backends import _OPTION_FLAGS  # the JSON options as the flags that request them
    from sgcli.constraints.spec import Kind

    table = Table(title="grammar backends", title_justify="left", show_lines=True)
    for col in ("backend", "version", "kinds", "JSON options", "auto", "notes"):
        table.add_column(col, overflow="fold", no_wrap=col in ("backend", "version", "auto"))
    for r in rows:
        name = r["backend"] + (" (default)" if r["default"] else "")
        version = r["version"] if r["available"] else f"[red]missing[/]: {r['unavailable_reason']}"
        kinds = ", ".join(Kind(k).label for k in r["kinds"])
        options = ", ".join(_OPTION_FLAGS[o] for o in r["json_options"]) or "-"
        table.add_row(name, version, kinds, options, str(r["auto_rank"] or "-"), r["notes"])
    out.print(table)
