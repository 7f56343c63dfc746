"""After generation: does the output actually satisfy the constraint?

The grammar guarantees syntax, not truth: schema outputs are parsed and validated with
jsonschema (keywords a backend did not enforce show up here), regexes re-matched,
choices compared. Output cut off before the grammar completed is never a success.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from sgcli.constraints.spec import ConstraintSpec, Kind


@dataclass
class Verdict:
    valid: bool
    parsed: Any = None
    errors: list[str] = field(default_factory=list)


def validate(spec: ConstraintSpec, output: str, *, finish_reason: str, grammar_complete: bool) -> Verdict:
    errors: list[str] = []
    if finish_reason == "length":
        errors.append(
            "output was cut off by --max-tokens before the constraint was complete"
            if not grammar_complete
            else "output hit --max-tokens"
        )
    elif finish_reason == "error":
        errors.append("generation stopped on a grammar error")
    parsed = None
    kind = spec.kind
    if kind is Kind.JSON_SCHEMA:
        try:
            parsed = json.loads(output)
        except json.JSONDecodeError as exc:
            errors.append(f"output is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        else:
            errors.extend(_schema_errors(spec.schema(), parsed))
    elif kind is Kind.REGEX:
        if _fullmatch(spec.text, output) is False:
            errors.append(f"output does not match the regex {spec.text!r}")
    elif kind is Kind.CHOICE:
        if output not in spec.choices:
            errors.append(f"output is not one of the choices {list(spec.choices)}")
    elif kind is not Kind.NONE and not grammar_complete and finish_reason != "length":
        errors.append("output is not a complete sentence of the grammar")
    return Verdict(valid=not errors, parsed=parsed, errors=errors)


def _fullmatch(pattern: str, text: str) -> bool | None:
    """Python's re as a second opinion; None when the backend dialect is not Python's."""
    try:
        return re.fullmatch(pattern, text, flags=re.DOTALL) is not None
    except re.error:
        return None


def _schema_errors(schema, instance) -> list[str]:
    import jsonschema
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    out = []
    for err in sorted(cls(schema).iter_errors(instance), key=lambda e: list(e.path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        out.append(f"schema violation at {where}: {err.message}")
    return out
