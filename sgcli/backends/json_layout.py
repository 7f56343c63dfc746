"""JSON layout options expressed the ways backends without a native knob can take them.

llguidance and outlines-core describe JSON whitespace as one regex used between tokens,
so `--max-whitespace N` and `--json-whitespace flexible/compact` become such a regex
here. `--strict-properties` (xgrammar's strict mode) becomes a schema rewrite:
`additionalProperties: false` wherever an object schema leaves extra properties open.
"""

from __future__ import annotations

import copy

from sgcli.constraints.spec import JsonOptions
from sgcli.errors import UserError

# The whitespace JSON itself allows (RFC 8259): space, tab, newline, carriage return.
JSON_WS = r"[ \t\n\r]"


def whitespace_regex(o: JsonOptions) -> str:
    """The regex for whitespace between JSON tokens that `o` asks for ('' = none)."""
    if o.whitespace_pattern is not None:
        if o.max_whitespace is not None:
            raise UserError(
                "--whitespace-pattern and --max-whitespace both given",
                hint="bound the repetition inside the pattern instead, e.g. '[ ]{0,4}'",
            )
        if o.whitespace == "compact":
            raise UserError("--whitespace-pattern contradicts --json-whitespace compact", hint="keep one of them")
        return o.whitespace_pattern
    if o.whitespace == "compact":
        return ""
    if o.max_whitespace is not None:
        return f"{JSON_WS}{{0,{o.max_whitespace}}}"
    return f"{JSON_WS}*"


_OPEN_MARKERS = ("additionalProperties", "unevaluatedProperties", "patternProperties")


def strict_schema(schema):
    """A copy of `schema` where objects without an explicit rule for extra properties forbid them,
    and tuples (`prefixItems` without `items`) forbid extra items, as xgrammar's strict mode does."""
    from sgcli.backends.schema_warnings import iter_subschemas

    schema = copy.deepcopy(schema)
    for _, node in list(iter_subschemas(schema)):
        is_object = node.get("type") == "object" or "properties" in node
        if is_object and not any(k in node for k in _OPEN_MARKERS):
            node["additionalProperties"] = False
        if "prefixItems" in node and "items" not in node and "unevaluatedItems" not in node:
            node["items"] = False
    return schema
