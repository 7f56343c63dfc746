"""`sgcli schema [NAME]`: the JSON Schema of a record sgcli prints, for consumers to validate against;
without NAME, the names."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from sgcli.cli.common import JsonFlagOpt, JsonRows, OutputFormatOpt, json_line, out, output_format_of
from sgcli.errors import UserError, did_you_mean

EXAMPLES = """
Examples:

  sgcli schema                                  # the names, with the command that prints each

  sgcli schema record > record.schema.json      # what `generate --json` prints, one per line

  sgcli schema diagnostic                       # what `lint --output-format json-lines` prints

  sgcli schema compare                          # a `compare-backends --output-format json-lines` row
"""
# The names of sgcli/records/ MODELS, spelled here so `--help` needs no pydantic (tests check they match).
NAMES = (
    "record, diagnostic, lint-statistics, backend, engine, compare, compile, test-case, test-file, bench-item, "
    "bench-backend, mask-step, mask-summary, rule, convert, template-render, config, config-setting, cache-info, "
    "cache-section, cache-cleared, cache-cleared-section, tokenizer, tokenizer-diff, schema-name"
)


def schema(
    name: Annotated[Optional[str], typer.Argument(help=f"One of: {NAMES}. Without it: the list.")] = None,
    output_format: OutputFormatOpt = None,
    json_flag: JsonFlagOpt = False,
) -> None:
    """Print the JSON Schema of one of sgcli's JSON outputs (versioned by `schema_version`), or list them."""
    from sgcli.records import MODELS, json_schema

    if name is None:
        _list(MODELS, output_format_of(output_format, json_flag, stream=True))
        return
    if name not in MODELS:
        raise UserError(f"no schema named '{name}'." + did_you_mean(name, MODELS), hint="one of: " + ", ".join(MODELS))
    if output_format_of(output_format, json_flag) == "jsonl":
        json_line(json_schema(name))  # on one line
    else:  # concise and json (--json): the same document, indented for reading
        sys.stdout.write(json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n")


def _list(models: dict, fmt: str) -> None:
    """Each name and the first line of its model's docstring (which says what prints it)."""
    from sgcli import RECORD_SCHEMA_VERSION

    rows = [
        {"schema_version": RECORD_SCHEMA_VERSION, "name": n, "description": (m.__doc__ or "").strip().split("\n")[0]}
        for n, m in models.items()
    ]
    if fmt != "text":
        writer = JsonRows(fmt)
        for row in rows:
            writer.write(row)
        writer.close()
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        out.print(f"{r['name']:<{width}}  {r['description']}", markup=False)
