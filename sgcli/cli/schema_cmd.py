"""`sgcli schema NAME`: the JSON Schema of a record sgcli prints, for consumers to validate against."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, json_line, output_format_of
from sgcli.errors import UserError

EXAMPLES = """
Examples:

  sgcli schema record > record.schema.json      # what `generate --json` prints, one per line

  sgcli schema diagnostic                       # what `lint --output-format json-lines` prints

  sgcli schema compare                          # a `compare-backends --output-format jsonl` row
"""
# The names of sgcli/records/ MODELS, spelled here so `--help` needs no pydantic (tests check they match).
NAMES = (
    "record, diagnostic, backend, engine, compare, compile, test-case, test-file, bench-item, bench-backend, "
    "mask-step, mask-summary, rule, config, config-setting, cache-info, cache-section, cache-cleared, "
    "cache-cleared-section, tokenizer, tokenizer-diff"
)


def schema(
    name: Annotated[str, typer.Argument(help=f"One of: {NAMES}.")],
    output_format: OutputFormatOpt = None,
    json_flag: JsonFlagOpt = False,
) -> None:
    """Print the JSON Schema of one of sgcli's JSON outputs (versioned by `schema_version`)."""
    from sgcli.records import MODELS, json_schema

    if name not in MODELS:
        raise UserError(f"no schema named '{name}'", hint="one of: " + ", ".join(MODELS))
    if output_format_of(output_format, json_flag) == "jsonl":
        json_line(json_schema(name))  # on one line
    else:  # text and json (--json): the same document, indented for reading
        sys.stdout.write(json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n")
