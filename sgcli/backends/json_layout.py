"""JSON layout options expressed the ways backends without a native knob can take them.

llguidance and outlines-core describe JSON whitespace as one regex used between tokens,
so `--max-whitespace N` and `--json-whitespace flexible/compact` become such a regex
here. `--strict-properties` (xgrammar's strict mode) becomes a schema rewrite:
`additionalProperties: false` wherever an object schema leaves extra properties open.
"""

from __future__ import annotations

import copy
import re

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
# `a` to jsonschema; 2026-12-06). Lost: the characters only `\uXXXX` writes (the control characters
# other than these five, and DEL in llguidance's spelling), so a schema that can ask for one keeps
# every escape: llguidance wrote `{"const": "a\u0001b"}` as "ab" without them (`one_spelling_fits`).
UNIQUE_ESCAPES = 'nrbtf\\"'
_ONLY_ESCAPED = frozenset(chr(c) for c in range(0x20) if chr(c) not in "\b\f\n\r\t") | {"\x7f"}
# a regex escape that can name such a character: \x01, \x7f, \x{..}, \u0001, \U00000001, \cA, \0
_ESCAPED_CONTROL = re.compile(r"\\(?:x[01]|x7[fF]|x\{|u00[01]|u007[fF]|U0000|c[A-Za-z]|0)")


def one_spelling_fits(schema) -> bool:
    """Whether no string `schema` names (a value, a key, a `pattern`) holds or matches a character that
    only a `\\uXXXX` escape writes: then `UNIQUE_ESCAPES` loses nothing it asks for."""
    stack = [schema]
    while stack:  # iterative: the schema was parsed with a bounded depth, nothing here recurses
        value = stack.pop()
        if isinstance(value, dict):
            if not all(_fits(key) for key in value):
                return False
            stack += value.values()
        elif isinstance(value, list):
            stack += value
        elif isinstance(value, str) and not _fits(value):
            return False
    return True


def _fits(text: str) -> bool:
    """No such character in `text`, nor an escape that names one if `text` is a regex (any string is
    read as one: a description that spells `\\0` only keeps every escape)."""
    return not (_ONLY_ESCAPED & set(text)) and not _ESCAPED_CONTROL.search(text)


def json_overrides(spec: ConstraintSpec, schema) -> dict:
    """llguidance's JsonCompileOptions for the spec's JSON layout (its `x-guidance` keys), and, when
    compiled to generate from, its strings' escapes narrowed to `UNIQUE_ESCAPES` where `schema` (the
    JSON Schema they are for) loses nothing by it."""
    o = spec.json_options
    escapes = {"json_allowed_escapes": UNIQUE_ESCAPES} if o.for_generation and one_spelling_fits(schema) else {}
    if o.whitespace_pattern is None and o.max_whitespace is None:
        if o.whitespace == "flexible":
            return {"whitespace_flexible": True} | escapes
        return {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"} | escapes
    return {"whitespace_flexible": True, "whitespace_pattern": whitespace_regex(o)} | escapes
