"""Why a backend's grammar does not enforce one keyword of one subschema, as it stands there: beside
which siblings it is dropped, which values it writes otherwise than jsonschema reads them, which
readings of its patterns, numbers and names differ. The backend's declared table (`SchemaKeywords`)
says what it enforces; this reads one node against it. `keyword_coverage` walks a whole schema with it.
"""

from __future__ import annotations

from collections.abc import Callable

from sgcli.backends.base import SchemaKeywords
from sgcli.backends.disjoint import disjoint_types
from sgcli.backends.pattern_gaps import name_pattern_misread
from sgcli.backends.schema_doc import COMPANIONS, lists_optional_properties

# JSON type each type-specific keyword constrains (a backend may apply it only beside that `type`)
_TYPE_OF = {
    **dict.fromkeys(("minLength", "maxLength", "pattern", "format", "contentEncoding"), "string"),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"), "number"),
    **dict.fromkeys(
        ("items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains")
        + ("minContains", "maxContains", "unevaluatedItems"),
        "array",
    ),
    **dict.fromkeys(
        ("properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties")
        + ("propertyNames", "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties"),
        "object",
    ),
}


# keywords that apply by a property's name: a grammar that reads a name as its raw text misses them where
# an escape spells it (with `additionalProperties: false` such a name is refused instead: no value passes)
NAMED_BY_KEY = (
    "properties",
    "patternProperties",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
)


def _single_type(node: dict) -> set[str]:
    """The one JSON type `type` names (a list of types was not measured, so it counts as none)."""
    t = node.get("type")
    return {"integer", "number"} if t == "integer" else {t} if isinstance(t, str) else set()


_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value) -> bool:
    """An integer as JSON writes it (5, not 5.0: the library may read that as a number)."""
    return isinstance(value, int) and not isinstance(value, bool)


# a length the grammar drops beside a `format` whose values the checker cannot budget as it goes: the
# grammar writes the format whatever its length, so the length is found broken only where nothing
# the format allows can repair it (xgrammar wrote 20 characters of an email with no `@` under
# maxLength 20, and backtracking gave up). An email's `@` is budgeted (`json_strings.at_need`).
_LENGTH_DEAD_END = (
    "; generation may reach a dead end there (a value of the format that cannot end within the length), "
    "which llguidance, enforcing both, does not"
)


def _length_of_format(node: dict, keyword: str) -> bool:
    return keyword in ("minLength", "maxLength") and node.get("format") not in ("email", "idn-email")


def why_unenforced(
    node: dict,
    keyword: str,
    table: SchemaKeywords,
    keys: list[str],
    values_meet: Callable[[dict], bool],
    resolve: Callable[[str], object] | None = None,
) -> str | None:
    """Why `table`'s backend does not enforce `keyword` of `node` (None when it does); `keys`: the
    node's constraint keywords; `values_meet(node)`: whether every value its `enum`/`const` lists meets
    the node's other keywords; `resolve(ref)`: the subschema a `$ref` of `node` names (or None)."""
    beside = next((k for k in table.drops_beside if k in node and k != keyword), None)
    if beside is not None and keyword not in table.drops_beside:
        return f"dropped beside `{beside}`"
    held = next((k for k in table.drops_beside_values if k in node and k != keyword), None)
    if held is not None and keyword not in table.drops_beside_values and not values_meet(node):
        return f"dropped beside `{held}`, which lists a value that breaks it"
    if table.lone_all_of and keyword != "allOf" and "allOf" in node:
        return "merged with the `allOf` beside it, which is not what allOf means"
    for group in table.exclusive_groups:
        if keyword in group and sum(k in node for k in group) > 1:
            return "not enforced beside " + " and ".join(f"`{k}`" for k in sorted(group - {keyword}) if k in node)
    if keyword in ("properties", "additionalProperties") and "patternProperties" in node:
        if "patternProperties" not in table.enforced or "patternProperties" not in table.through:
            return "which properties it covers depends on `patternProperties`, which is not enforced"
    if keyword == "required" and table.required_listed:
        listed = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        if not isinstance(node.get("required"), list) or any(name not in listed for name in node["required"]):
            return "enforced only for names `properties` lists"
    if keyword in ("minProperties", "maxProperties") and table.counts_all_required and lists_optional_properties(node):
        return "counted over the properties `properties` does not list, where some it lists are optional"
    if keyword in COMPANIONS and keyword not in table.enforced:
        return f"part of `{COMPANIONS[keyword]}`, not enforced"
    if keyword == "oneOf" and keyword not in table.enforced:
        if table.disjoint_one_of and disjoint_types(node.get("oneOf"), resolve):
            return None
        return "enforced as anyOf (an instance may match several branches)"
    if keyword not in table.enforced:
        return "not enforced"
    value = node.get(keyword)
    if keyword == "multipleOf" and isinstance(value, float) and not value.is_integer():
        # the grammar divides the number as written, the check the float it is read as (exact_numbers): past
        # 15 digits they differ (1234567890123456.9 is a multiple of 0.3; the float it reads as is not)
        return "a fractional divisor: the grammar divides the number as written, the check the float it reads as"
    if keyword in _BOUNDS and _is_number(value) and abs(value) > 2**53:
        return "a bound past 2**53, which the grammar rounds to a float (9007199254740993 read as ...992)"
    if keyword in _BOUNDS and table.bounded_places is not None and _no_number_between(node, table.bounded_places):
        return f"{NO_NUMBER_BETWEEN} {table.bounded_places} decimal places, the only numbers written between two bounds"
    if table.decimal_bounds and _exclusive(node, keyword) and node.get("type") != "integer":
        return "an exclusive bound the grammar compares in decimal: a value that rounds onto it in floats passes"
    if keyword in ("enum", "const") and any(inexact(v) for v in (value if keyword == "enum" else [value]) or ()):
        return INEXACT_NUMBER + " (past 2**53, or more than 15 significant digits)"
    if keyword in table.typed and _TYPE_OF.get(keyword) not in _single_type(node):
        return f'enforced only beside `"type": "{_TYPE_OF[keyword]}"`'
    if keyword in table.integer_only and (node.get("type") != "integer" or not _is_int(node.get(keyword))):
        return 'enforced only beside `"type": "integer"`, with an integer value'
    for dropped, siblings in table.dropped_beside:  # a `format` the backend does not know is no sibling to it
        present = [k for k in sorted(siblings) if k in node and (k != "format" or node[k] in table.formats)]
        beside = present[0] if keyword == dropped and present else None
        if beside is not None:
            return f"dropped beside `{beside}`" + (_LENGTH_DEAD_END if _length_of_format(node, keyword) else "")
    if keyword == "format" and node.get("format") not in table.formats:
        return f"format {node.get('format')!r} not enforced"
    if keyword == "format" and node.get("format") in table.approximate_formats:
        return f"format {node.get('format')!r} only approximated (its grammar takes some invalid values)"
    if keyword == "allOf" and table.lone_all_of:
        if not isinstance(node.get("allOf"), list) or len(node["allOf"]) > 1:
            return "allOf with several subschemas is not enforced"
        if len(keys) > 1:
            return "allOf beside other keywords is merged into them, which is not what allOf means"
    if keyword in ("enum", "const") and not table.escaped_values:
        values = node.get("enum") if keyword == "enum" else [node.get("const")]
        if values == []:
            return "an empty enum is written as no value at all"
        if any(_holds_escape(v) for v in (values if isinstance(values, list) else [])):
            return "values that need JSON escapes (quotes, control characters) are written raw"
    if keyword == "properties" and not table.escaped_names and isinstance(node.get("properties"), dict):
        if any(_needs_escape(name) for name in node["properties"]):
            return "property names that need JSON escapes are not matched correctly"
    if (
        keyword in NAMED_BY_KEY
        and table.raw_escaped_names == "always"
        and node.get("additionalProperties") is not False
    ):
        # `{"\u0061": "x"}` beside `properties: {"a": integer}` is an additional property to the grammar
        return (
            "a property name written with a JSON escape (`\\u0061`) is matched as its raw text, not the name it spells"
        )
    if keyword == "properties" and not table.ascii_names and isinstance(node.get("properties"), dict):
        if not all(name.isascii() for name in node["properties"]):
            return "property names beyond ASCII are matched as additional properties"
    if keyword == "properties" and isinstance(value, dict) and any(_draft3_required(sub) for sub in value.values()):
        return "draft 3's `required: true` on a property it lists: no grammar reads it"
    if keyword == "patternProperties" and isinstance(value, dict):
        if "" in value and node.get("additionalProperties") is False:  # jsonschema joins the patterns: "" is falsy
            return "an empty name pattern beside `additionalProperties: false`: jsonschema then refuses every name"
        misread = next(filter(None, (name_pattern_misread(p, table) for p in value)), None)
        if misread:
            return f"a name pattern with {misread}, which the grammar reads otherwise than jsonschema"
    if keyword == "minProperties" and not (_is_number(value) and value <= 1):
        # JSON lets a key repeat: the grammar counts `{"b":1,"b":2}` as two properties, jsonschema as one
        return "a repeated key counts twice in the grammar and once to jsonschema"
    return None


def _no_number_between(node: dict, places: int) -> bool:
    """Whether `node`'s two bounds leave no multiple of 10**-places between them (exact decimal
    arithmetic on the numbers as written; draft 4's boolean exclusive flags read too)."""
    from decimal import Decimal
    from math import ceil, floor

    if node.get("type") != "number":
        return False
    low = [(node[k], _exclusive(node, k)) for k in ("minimum", "exclusiveMinimum") if _is_number(node.get(k))]
    high = [(node[k], _exclusive(node, k)) for k in ("maximum", "exclusiveMaximum") if _is_number(node.get(k))]
    if not low or not high:
        return False
    scale = Decimal(10) ** places
    lo, lo_open = max(((Decimal(repr(v)) * scale, o) for v, o in low), key=lambda b: (b[0], b[1]))
    hi, hi_open = min(((Decimal(repr(v)) * scale, o) for v, o in high), key=lambda b: (b[0], not b[1]))
    first = floor(lo) + 1 if lo_open and lo == floor(lo) else ceil(lo)
    last = ceil(hi) - 1 if hi_open and hi == ceil(hi) else floor(hi)
    return first > last


def _exclusive(node: dict, keyword: str) -> bool:
    """Whether `keyword` is an exclusive numeric bound of `node` (draft 4's boolean form: on its bound)."""
    if keyword in ("exclusiveMinimum", "exclusiveMaximum"):
        return _is_number(node.get(keyword))
    flag = {"minimum": "exclusiveMinimum", "maximum": "exclusiveMaximum"}.get(keyword)
    return flag is not None and node.get(flag) is True


INEXACT_NUMBER = "a number no grammar is known to write exactly"
NO_NUMBER_BETWEEN = "a range that holds no number of at most"


def inexact(value) -> bool:
    """A number (anywhere in an enum/const value) a grammar may write as another: llguidance wrote
    9007199254740993 as ...992, 1e23 as 100000000000000000000000 and 123456789.12345679 as ...568."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) > 2**53
    if isinstance(value, float):
        return abs(value) >= 2**53 or float(f"{value:.15g}") != value
    if isinstance(value, dict):
        return any(inexact(v) for v in value.values())
    return isinstance(value, list) and any(inexact(v) for v in value)


def _draft3_required(sub) -> bool:
    """A property's subschema saying `required: true` (draft 3; a later draft refuses the schema)."""
    return isinstance(sub, dict) and sub.get("required") is True


def _holds_escape(value) -> bool:
    """Whether a JSON value holds a string (or key) that JSON writes with an escape."""
    if isinstance(value, str):
        return _needs_escape(value)
    if isinstance(value, dict):
        return any(_needs_escape(k) or _holds_escape(v) for k, v in value.items())
    return isinstance(value, list) and any(_holds_escape(v) for v in value)


def _needs_escape(name: str) -> bool:
    return any(ch in '"\\' or ord(ch) < 0x20 for ch in name)
