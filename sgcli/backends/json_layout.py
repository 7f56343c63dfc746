"""JSON layout options expressed the ways backends without a native knob can take them.

llguidance and outlines-core describe JSON whitespace as one regex used between tokens,
so `--max-whitespace N` and `--json-whitespace flexible/compact` become such a regex
here. `--strict-properties` (xgrammar's strict mode) becomes a schema rewrite:
`additionalProperties: false` wherever an object schema leaves extra properties open.
"""

from __future__ import annotations

import copy

from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.constraints.spec import ConstraintSpec, JsonOptions

# The whitespace JSON itself allows (RFC 8259): space, tab, newline, carriage return.
JSON_WS = r"[ \t\n\r]"


def whitespace_regex(o: JsonOptions) -> str:
    """The regex for the whole whitespace slot between JSON tokens that `o` asks for ('' = none).

    `--whitespace-pattern P` means "nothing, or one match of P" (JsonOptions): llguidance
    already makes its pattern optional, outlines-core puts it verbatim at every separator,
    so the slot is written `(?:P)?` and both read it alike. (JsonOptions refuses combinations.)
    """
    if o.whitespace_pattern is not None:
        return f"(?:{o.whitespace_pattern})?"
    if o.whitespace == "compact":
        return ""
    if o.max_whitespace is not None:
        return f"{JSON_WS}{{0,{o.max_whitespace}}}"
    return f"{JSON_WS}*"


_OPEN_MARKERS = ("additionalProperties", "unevaluatedProperties", "patternProperties")


def strict_schema(schema):
    """A copy of `schema` where objects without an explicit rule for extra properties forbid them,
    and tuples (`prefixItems` without `items`) forbid extra items, as xgrammar's strict mode does."""
    schema = copy.deepcopy(schema)
    for _, node in list(iter_subschemas(schema)):
        is_object = node.get("type") == "object" or "properties" in node
        if is_object and not any(k in node for k in _OPEN_MARKERS):
            node["additionalProperties"] = False
        if "prefixItems" in node and "items" not in node and "unevaluatedItems" not in node:
            node["items"] = False
    return schema


# The escapes a string may use when generating: one spelling per character. `\uXXXX` (and `\/`) spell
# characters that have another spelling, and a backend matches property names as written: llguidance
# and xgrammar took `{"\u0061": "x"}` under `properties: {"a": integer}` (an additional key to them,
# `a` to jsonschema; 2026-12-06). Lost: the control characters other than these five in free strings.
UNIQUE_ESCAPES = 'nrbtf\\"'


def json_overrides(spec: ConstraintSpec) -> dict:
    """llguidance's JsonCompileOptions for the spec's JSON layout (its `x-guidance` keys), and, when
    compiled to generate from, its strings' escapes narrowed to `UNIQUE_ESCAPES`."""
    o = spec.json_options
    escapes = {"json_allowed_escapes": UNIQUE_ESCAPES} if o.for_generation else {}
    if o.whitespace_pattern is None and o.max_whitespace is None:
        if o.whitespace == "flexible":
            return {"whitespace_flexible": True} | escapes
        return {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"} | escapes
    return {"whitespace_flexible": True, "whitespace_pattern": whitespace_regex(o)} | escapes
