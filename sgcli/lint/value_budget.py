"""J006 and J008: a schema string or array whose length only the model decides, in one walk.

J006: a string with no length bound, or one whose bound costs more tokens than the budget.

Inside a JSON string the grammar allows any character, so only the model decides where the string
ends. A small or base model often never closes it (`"john_john_john_...`): the run ends at
`--max-tokens` with the object unfinished, and the output is invalid. A bound (`maxLength`, an
`enum`, a fully anchored `pattern` with bounded repetitions, a fixed-width `format`) lets the backend
force the closing quote. The cost of a bounded string is estimated at CHARS_PER_TOKEN characters a
token (short words of English and code in the small vocabularies these models use), which is why a
bound as long as the budget is flagged too: the model would spend the whole run on one value.

J008: an array with no `maxItems` (nor a closed tuple, an `enum` or a `const`), or one whose `maxItems`
costs more tokens than the budget. The grammar lets the model add item after item; SmolLM2-135M wrote
invoice lines `"quantity":1`, 2, ... 10 until --max-tokens, where `maxItems: 5` ended the same run
valid in 158 tokens. An item is costed at its floor, ITEM_TOKENS and a separator's SEPARATOR_TOKENS,
whatever its type: `maxItems: 100000` bounds nothing a budget of hundreds can reach.
"""

from __future__ import annotations

import math

from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.constraints.jsonpos import SchemaText, pointer_of
from sgcli.dialects.grammar_model import Alt, Chars, Lit, Node, Opaque, ParseError, Rep, Seq
from sgcli.dialects.regex_parse import LOOKAROUNDS, parse_regex
from sgcli.lint.diagnostic import Diagnostic, at_offset

CHARS_PER_TOKEN = 3
# The least an array item costs (its value, then the `,` before the next): `[1,2,3]` is about a token each.
ITEM_TOKENS = 1
SEPARATOR_TOKENS = 1
# Formats whose every value has a fixed, short length (the backends spell them out as such).
BOUNDED_FORMATS = frozenset({"date", "time", "date-time", "uuid", "ipv4", "ipv6"})
# Subschemas that describe no generated value: a condition (`if`), a negation (`not`).
_NOT_GENERATED = frozenset({"if", "not"})
# Keywords that may evaluate items in place, so that `unevaluatedItems: false` no longer closes a tuple.
_EVALUATE_ITEMS = frozenset(
    {"additionalItems", "contains", "allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas"}
)
# Keywords whose children are named by the schema's author: there "if" or "not" is a name, not a keyword.
_NAMED_SUBSCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def value_budget(schema, stext: SchemaText, path: str, budget: int) -> list[Diagnostic]:
    """J006 for every string, J008 for every array, of `schema` that the model could write past `budget` tokens."""
    out = []
    for where, node in iter_subschemas(schema):
        if _under_condition(where):
            continue
        if _is_type(node, "string"):
            out += _string_finding(node, where, stext, path, budget)
        if _is_type(node, "array"):
            out += _array_finding(node, where, stext, path, budget)
    return out


def _array_finding(node: dict, where: tuple, stext: SchemaText, path: str, budget: int) -> list[Diagnostic]:
    if _closed_array(node):
        return []
    max_items = node.get("maxItems")
    if not isinstance(max_items, (int, float)) or isinstance(max_items, bool) or not math.isfinite(max_items):
        hint = "add a maxItems (as few as the data needs), or list the items with prefixItems and items: false"
        return [_finding("J008", where, stext, path, _unbounded_array(where, budget), hint)]
    cost = _items_cost(int(max_items))
    if cost <= budget:
        return []
    message = (
        f"the array at {pointer_of(where) or '/'} may take ~{cost} tokens (maxItems {int(max_items)}, at least "
        f"{ITEM_TOKENS} token an item and {SEPARATOR_TOKENS} a separator), more than the budget of {budget} "
        "(--max-tokens)"
    )
    most = max(1, (budget // 4 + SEPARATOR_TOKENS) // (ITEM_TOKENS + SEPARATOR_TOKENS))
    hint = (
        f"lower maxItems to at most {most} (a quarter of the budget), or list the items with prefixItems and "
        "items: false"
    )
    return [_finding("J008", where, stext, path, message, hint)]


def _items_cost(count: int) -> int:
    """The fewest tokens `count` items take: each at its floor, with a separator between two."""
    return count * ITEM_TOKENS + max(count - 1, 0) * SEPARATOR_TOKENS


def _string_finding(node: dict, where: tuple, stext: SchemaText, path: str, budget: int) -> list[Diagnostic]:
    longest = _longest(node)
    cost = None if longest is None else -(-longest[0] // CHARS_PER_TOKEN)
    if cost is not None and cost <= budget:
        return []
    pointer = pointer_of(where) or "/"
    if cost is None:
        message = (
            f"the string at {pointer} has no length bound (no maxLength, enum, or anchored pattern with "
            f"bounded repetitions): the model alone decides when it ends, and an output cut at "
            f"--max-tokens ({budget}) is invalid"
        )
    else:
        message = (
            f"the string at {pointer} may take ~{cost} tokens ({longest[1]}, ~{CHARS_PER_TOKEN} characters "
            f"a token), more than the budget of {budget} (--max-tokens)"
        )
    hint = (
        f"add a maxLength of at most {budget * CHARS_PER_TOKEN // 4} (a quarter of the budget), "
        "an enum, or a pattern such as ^[A-Za-z ]{1,40}$"
    )
    return [_finding("J006", where, stext, path, message, hint)]


def _unbounded_array(where: tuple, budget: int) -> str:
    return (
        f"the array at {pointer_of(where) or '/'} has no maxItems (nor a bounded prefixItems/items: false tuple, "
        f"enum or const): the model alone decides how many items, and an output cut at --max-tokens ({budget}) "
        "is invalid"
    )


def _finding(code: str, where: tuple, stext: SchemaText, path: str, message: str, hint: str) -> Diagnostic:
    """`code` at the subschema's `type` keyword (else the subschema itself)."""
    span = stext.key_span(where + ("type",)) or stext.key_span(where) or (0, None)
    return at_offset(code, stext.text, path, span[0], span[1], message, hint=hint)


def _closed_array(node: dict) -> bool:
    """Whether the schema lists every item the array may hold: a closed tuple (`items: false` after
    `prefixItems`, draft 4-2019-09's list `items` with `additionalItems: false`, or `unevaluatedItems:
    false` where only `prefixItems` or a list `items` evaluates items), an enum, a const."""
    if "enum" in node or "const" in node or node.get("items") is False:
        return True
    if isinstance(node.get("items"), list) and node.get("additionalItems") is False:
        return True
    items = node.get("items")
    return (
        node.get("unevaluatedItems") is False
        and (items is None or isinstance(items, list))
        and not _EVALUATE_ITEMS.intersection(node)
    )


def _under_condition(path: tuple) -> bool:
    """Whether `path` passes through an `if` or `not` keyword (a property named "not" is no keyword)."""
    return any(
        part in _NOT_GENERATED and (i == 0 or path[i - 1] not in _NAMED_SUBSCHEMAS) for i, part in enumerate(path)
    )


def _is_type(node: dict, name: str) -> bool:
    types = node.get("type")
    return types == name or (isinstance(types, list) and name in types)


def _longest(node: dict) -> tuple[int, str] | None:
    """The most characters the string may have and what says so; None when nothing bounds it."""
    if "enum" in node or "const" in node or node.get("format") in BOUNDED_FORMATS:
        return 0, "a fixed set of values"
    bounds = []
    max_length = node.get("maxLength")
    if isinstance(max_length, (int, float)) and not isinstance(max_length, bool):
        bounds.append((int(max_length), f"maxLength {int(max_length)}"))
    pattern = node.get("pattern")
    longest = _pattern_max_length(pattern) if isinstance(pattern, str) else None
    if longest is not None:
        bounds.append((longest, f"its pattern allows {longest} characters"))
    return min(bounds) if bounds else None


def _pattern_max_length(pattern: str) -> int | None:
    """The most characters a string matching `pattern` can have; None when unbounded or unknown. Only
    a pattern anchored at both ends bounds the string (a JSON Schema pattern is a search)."""
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        return None
    try:
        return _max_length(parse_regex(pattern).node)
    except (ParseError, RecursionError):
        return None


def _max_length(node: Node) -> int | None:
    if isinstance(node, Lit):
        return len(node.text)
    if isinstance(node, Chars):
        return 1
    if isinstance(node, (Seq, Alt)):
        parts = [_max_length(n) for n in (node.items if isinstance(node, Seq) else node.alts)]
        if any(p is None for p in parts):
            return None
        return sum(parts) if isinstance(node, Seq) else max(parts, default=0)
    if isinstance(node, Rep):
        body = _max_length(node.body)
        return None if node.max is None or body is None else node.max * body
    if isinstance(node, Opaque) and (node.what in LOOKAROUNDS or (node.sample == "" and not node.children)):
        return 0  # a look-around, an anchor: zero width (`^(?!aws:).{1,128}$` ends by 128)
    return None  # a backreference: not counted as a bound
