"""`sgcli schema NAME`: the JSON Schema of a record sgcli prints, for consumers to validate against."""

from __future__ import annotations

from typing import Annotated

import typer

from sgcli.cli.common import json_line
from sgcli.errors import UserError

EXAMPLES = """
Examples:

  sgcli schema record > record.schema.json      # what `generate --json` prints, one per line

  sgcli schema diagnostic                       # what `lint --output-format json-lines` prints

  sgcli schema compare                          # a `compare-backends --output-format jsonl` row
"""
# The names of sgcli/records.py MODELS, spelled here so `--help` needs no pydantic (tests check they match).
NAMES = "record, diagnostic, backend, engine, compare, compile, test-case, test-file, bench-item, bench-backend"


def schema(
    name: Annotated[str, typer.Argument(help=f"One of: {NAMES}.")],
) -> None:
    """Print the JSON Schema of one of sgcli's JSON outputs (versioned by `schema_version`)."""
    from sgcli.records import MODELS, json_schema

    if name not in MODELS:
        raise UserError(f"no schema named '{name}'", hint="one of: " + ", ".join(MODELS))
    json_line(json_schema(name))
