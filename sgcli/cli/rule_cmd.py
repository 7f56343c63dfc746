"""`sgcli rule CODE`: what a lint rule checks, why it matters, and how to fix it."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, json_line, output_format_of
from sgcli.cli.tables import print_table
from sgcli.errors import UserError, did_you_mean
from sgcli.lint.rules import FAMILIES, RULES
from sgcli.lint.rules import all_rules as every_rule

EXAMPLES = """
Examples:

  sgcli rule W001

  sgcli rule --all

  sgcli rule J001 --json
"""


def rule(
    code: Annotated[Optional[str], typer.Argument(metavar="CODE", help="A rule code, e.g. G001.")] = None,
    all_rules: Annotated[bool, typer.Option("--all", help="List every rule.")] = False,
    output_format: OutputFormatOpt = None,
    json_out: JsonFlagOpt = False,
) -> None:
    """Explain a lint rule (or list them all with --all).

    Exit codes: 0 ok, 2 unknown code or no code given.
    """

    fmt = output_format_of(output_format, json_out, stream=all_rules)
    if all_rules:
        if fmt != "text":
            writer = JsonRows(fmt)
            for r in every_rule():
                writer.write(r.as_dict())
            writer.close()
            return
        from rich.table import Table

        table = Table(show_header=True, header_style="bold", box=None)
        for col in ("code", "name", "severity", "needs", "summary"):
            table.add_column(col, overflow="fold")
        for r in every_rule():
            table.add_row(r.code, r.name, r.severity, r.needs, r.summary)
        print_table(table)
        return
    if code is None:
        raise UserError("give a rule code, or --all to list them", hint="e.g. sgcli rule G001")
    r = RULES.get(code.strip().upper())
    if r is None:
        family = FAMILIES.get(code.strip()[:1].upper())
        known = ", ".join(c for c in RULES if family is None or c.startswith(code.strip()[:1].upper()))
        raise UserError(f"no rule {code}." + did_you_mean(code.strip().upper(), RULES), hint=f"known codes: {known}")
    if fmt != "text":
        json_line(r.as_dict())
        return
    lines = [
        f"{r.code} {r.name} ({r.severity}; family {r.code[0]}: {r.family}; needs: {r.needs})",
        "",
        r.summary,
        "",
        r.explanation,
    ]
    if r.example:
        lines += ["", "Example:", *("    " + line for line in r.example.split("\n"))]
    if r.fix:
        lines += ["", "Fix:", *("    " + line for line in r.fix.split("\n"))]
    sys.stdout.write("\n".join(lines) + "\n")
