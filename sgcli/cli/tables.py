"""Printing result tables so that piped output stays whole (no cells cut at 80 columns)."""

from __future__ import annotations

import sys

from sgcli.cli.common import out

PIPE_WIDTH = 200  # wide enough for file paths and messages; a terminal uses its own width


def print_table(table) -> None:
    if out.is_terminal:
        out.print(table)
        return
    from rich.console import Console

    Console(file=sys.stdout, width=PIPE_WIDTH, highlight=False, no_color=True).print(table)
