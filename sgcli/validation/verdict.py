"""What a check concludes (`Verdict`), why there is none (`Unchecked`), and the JSON Schema check the others reuse."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.formats import format_checker


class Unchecked(Exception):
    """No independent check can judge this output; the message says why."""


@dataclass
class Verdict:
    valid: bool | None  # None: nothing independent could check it (see `unchecked`)
    parsed: Any = None
    errors: list[str] = field(default_factory=list)
    validated_by: str | None = None
    unchecked: str | None = None  # why there is no verdict, when valid is None


def json_verdict(schema, output: str) -> Verdict:
    try:
        parsed = json.loads(output)
    except json.JSONDecodeError as exc:
        msg = f"output is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        return Verdict(None, errors=[msg], validated_by="jsonschema")
    return Verdict(None, parsed=parsed, errors=schema_errors(schema, parsed), validated_by="jsonschema")


def schema_errors(schema, instance) -> list[str]:
    """Every violation of `schema` by `instance`, formats included; Unchecked when the schema
    cannot be applied (a remote $ref, ...)."""
    cls = dialect_of(schema).cls
    out = []
    try:
        validator = cls(schema, format_checker=format_checker(cls))
        found = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    except Exception as exc:  # referencing.Unresolvable, RefResolutionError, ...: the schema, not the output
        raise Unchecked(f"jsonschema cannot apply the schema: {type(exc).__name__}: {exc}") from None
    for err in found:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        out.append(f"schema violation at {where}: {err.message}")
    return out
