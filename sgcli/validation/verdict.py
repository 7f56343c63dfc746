"""What a check concludes (`Verdict`), why there is none (`Unchecked`), and the JSON Schema check the others reuse."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.formats import format_checker
from sgcli.constraints.jsonpos import pointer_of
from sgcli.constraints.spec import NotJsonNumber, json_int
from sgcli.lone_surrogates import lone_surrogate


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
    repeated: list[str] = []
    try:
        parsed = json.loads(
            output, parse_constant=_not_json, parse_int=json_int, object_pairs_hook=_noting_repeats(repeated)
        )
    except json.JSONDecodeError as exc:
        # json's own wording may end in "at" already ("Unterminated string starting at")
        at = "" if exc.msg.endswith(" at") else " at"
        msg = f"output is not JSON: {exc.msg}{at} line {exc.lineno} column {exc.colno}"
        return Verdict(None, errors=[msg], validated_by="jsonschema")
    except _NotJson as exc:
        return Verdict(None, errors=[f"output is not JSON: {exc} is Python's, not JSON's"], validated_by="jsonschema")
    except NotJsonNumber as exc:
        raise unreadable_integer(exc) from None
    except RecursionError:  # json recurses per level; so would jsonschema
        wrong = _wrong_root_type(schema, output)
        if wrong is None:
            raise Unchecked("the output is nested too deeply for the checker") from None
        return Verdict(None, errors=[wrong], validated_by="jsonschema's `type` at the root (nested past its depth)")
    surrogate, infinite = _odd_parts(parsed)
    if surrogate:  # no UTF-8 text holds one: neither a record nor a reader of the output could
        return Verdict(None, errors=[f"output cannot be judged: it holds {surrogate}"], validated_by="jsonschema")
    errors = [
        f"the key {key!r} appears twice in one object: JSON Schema leaves such a document undefined (JSON "
        "readers disagree on which value counts)"
        for key in dict.fromkeys(repeated)
    ]
    errors += schema_errors(schema, parsed)
    # `548e+28668683` is JSON, read as infinity, which jsonschema judges; the record keeps the output text
    # alone, since its `parsed` must stay strict JSON (`Infinity` broke every reader of the JSONL)
    return Verdict(None, parsed=None if infinite else parsed, errors=errors, validated_by="jsonschema")


_ROOT_TYPES = {"{": ("object",), "[": ("array",), '"': ("string",), "t": ("boolean",), "f": ("boolean",)}


def _wrong_root_type(schema, output: str) -> str | None:
    """Where an output nests past what json and jsonschema can read, its first character still says
    what it is at the top: one the root's `type` rules out is invalid whatever lies inside (a server
    answering `[[[...]]]` to `{"type": "object"}` had passed as unchecked, exit 0)."""
    wanted = schema.get("type") if isinstance(schema, dict) else None
    wanted = [wanted] if isinstance(wanted, str) else wanted
    head = output.lstrip(" \t\n\r")[:1]
    is_type = _ROOT_TYPES.get(head) or (
        ("null",) if head == "n" else ("number", "integer") if head in "-0123456789" else ()
    )
    if not isinstance(wanted, list) or not head or not is_type or any(t in wanted for t in is_type):
        return None
    article = "an" if is_type[0][0] in "aeiou" else "a"
    return (
        f"the output is {article} {is_type[0]} at the top, where the schema's `type` is {' or '.join(map(str, wanted))}"
    )


def unreadable_integer(exc: NotJsonNumber) -> Unchecked:
    """An integer longer than Python reads is JSON all the same, and may well meet the schema: no verdict
    (a 5,000-digit answer raised Python's ValueError, exit 3, and a batch stopped at that line)."""
    digits = len(exc.literal.lstrip("-"))
    return Unchecked(
        f"the output holds an integer of {digits} digits, longer than Python reads "
        f"({sys.get_int_max_str_digits():,} digits), so sgcli cannot check it"
    )


class _NotJson(ValueError):
    pass


def _noting_repeats(repeated: list):
    """json's object hook that keeps the last value of a repeated key, as `json.loads` does, and notes
    the key: `{"b": 1, "b": "x"}` was judged valid on its last value alone."""

    def pairs(items: list) -> dict:
        out = dict(items)
        if len(out) != len(items):
            seen: set = set()
            repeated.extend(k for k, _ in items if k in seen or seen.add(k))
        return out

    return pairs


def _not_json(name: str):
    """`NaN`, `Infinity`, `-Infinity`: Python's json reads them, JSON has none (a server answered `NaN`
    and sgcli reported it valid against `{"type": "number"}`, 2026-12-06)."""
    raise _NotJson(name)


def _odd_parts(value) -> tuple[str | None, bool]:
    """(a lone surrogate's description, whether a number is past a double's range) in a parsed value:
    `"\\ud800"` (half a UTF-16 pair) crashed the record writer and lost a whole batch, and a number
    read as infinity was written into the record as `Infinity`, which is no JSON."""
    infinite = False
    stack = [value]
    while stack:  # iterative: the JSON reader bounds the depth
        item = stack.pop()
        if isinstance(item, float) and item in (float("inf"), float("-inf")):
            infinite = True
        elif isinstance(item, str) and lone_surrogate(item) is not None:
            return "a lone surrogate escape (half of a UTF-16 pair), which no UTF-8 text holds", infinite
        elif isinstance(item, dict):
            if any(lone_surrogate(k) is not None for k in item):
                return "a lone surrogate escape in a key, which no UTF-8 text holds", infinite
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return None, infinite


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
        out.append(f"schema violation at {pointer_of(err.absolute_path) or '/'}: {err.message}")  # a JSON pointer
    return out
