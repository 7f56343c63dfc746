"""`sgcli config`: the settings in force, and where each one came from."""

from __future__ import annotations

from typing import Annotated

import typer

from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, json_line, out, output_format_of
from sgcli.cli.tables import print_table

EXAMPLES = """
Examples:

  sgcli config                      # resolved settings: value and source (flag > env > file > default)

  sgcli config --output-format json

  SGCLI_BACKEND=llguidance sgcli config
"""


def show_config(
    output_format: OutputFormatOpt = None,
    json_flag: JsonFlagOpt = False,
    path_only: Annotated[bool, typer.Option("--path", help="Print only the configuration file in use.")] = False,
) -> None:
    """Show the settings sgcli resolves from SGCLI_* variables and the nearest configuration file.

    The file is the nearest sgcli.toml (or .sgcli.toml) upward from the working directory, or
    a pyproject.toml with a [tool.sgcli] table. A flag on the command line beats both.
    """
    from sgcli import config

    cfg = config.current()
    fmt = output_format_of(output_format, json_flag)
    if path_only:
        out.print(str(cfg.path) if cfg.path else "", markup=False)
        return
    from sgcli import RECORD_SCHEMA_VERSION as VERSION

    rows = [
        {"schema_version": VERSION, "key": s.key, "value": s.value, "source": s.source, "help": config.KEYS[s.key].help}
        for s in cfg.settings()
    ]
    if fmt == "json":
        json_line(
            {
                "schema_version": VERSION,
                "path": str(cfg.path) if cfg.path else None,
                "table": cfg.table,
                "settings": rows,
            }
        )
        return
    if fmt == "jsonl":
        for row in rows:
            json_line(row)
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"configuration file: {cfg.origin()}"), title_justify="left")
    for column in ("setting", "value", "source"):
        table.add_column(column, overflow="fold")
    for row in rows:
        value = "-" if row["value"] is None else str(row["value"])
        table.add_row(escape(row["key"]), escape(value), escape(row["source"]))
    print_table(table)
