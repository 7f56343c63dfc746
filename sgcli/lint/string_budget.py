"""J006: a schema string with no length bound, or one whose bound costs more tokens than the budget.

Inside a JSON string the grammar allows any character, so only the model decides where the string
ends. A small or base model often never closes it (`"john_john_john_...`): the run ends at
`--max-tokens` with the object unfinished, and the output is invalid. A bound (`maxLength`, an
`enum`, a fully anchored `pattern` with bounded repetitions, a fixed-width `format`) lets the backend
force the closing quote. The cost of a bounded string is estimated at CHARS_PER_TOKEN characters a
token (short words of English and code in the small vocabularies these models use), which is why a
bound as long as the budget is flagged too: the model would spend the whole run on one value.
"""

from __future__ import annotations

from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.constraints.jsonpos import SchemaText, pointer_of
from sgcli.dialects.grammar_model import ParseError, Rep, walk
from sgcli.dialects.regex_parse import parse_regex
from sgcli.lint.diagnostic import Diagnostic, at_offset

CHARS_PER_TOKEN = 3
# Formats whose every value has a fixed, short length (the backends spell them out as such).
BOUNDED_FORMATS = frozenset({"date", "time", "date-time", "uuid", "ipv4", "ipv6"})
# Subschemas that describe no generated value: a condition (`if`), a negation (`not`).
_NOT_GENERATED = frozenset({"if", "not"})


def string_budget(schema, stext: SchemaText, path: str, budget: int) -> list[Diagnostic]:
    """J006 for every string subschema of `schema` that the model could write past `budget` tokens."""
    out = []
    for where, node in iter_subschemas(schema):
        if not _is_string(node) or _NOT_GENERATED.intersection(p for p in where if isinstance(p, str)):
            continue
        cost = _token_cost(node)
        if cost is not None and cost <= budget:
            continue
        pointer = pointer_of(where) or "/"
        if cost is None:
            message = (
                f"the string at {pointer} has no length bound (no maxLength, enum, or anchored pattern with "
                f"bounded repetitions): the model alone decides when it ends, and an output cut at "
                f"--max-tokens ({budget}) is invalid"
            )
        else:
            message = (
                f"the string at {pointer} may take ~{cost} tokens (maxLength {node['maxLength']}, "
                f"~{CHARS_PER_TOKEN} characters a token), more than the budget of {budget} (--max-tokens)"
            )
        span = stext.key_span(where + ("type",)) or stext.key_span(where) or (0, None)
        out.append(
            at_offset(
                "J006",
                stext.text,
                path,
                span[0],
                span[1],
                message,
                hint=f"add a maxLength of at most {budget * CHARS_PER_TOKEN // 4} (a quarter of the budget), "
                "an enum, or a pattern such as ^[A-Za-z ]{1,40}$",
            )
        )
    return out


def _is_string(node: dict) -> bool:
    types = node.get("type")
    return types == "string" or (isinstance(types, list) and "string" in types)


def _token_cost(node: dict) -> int | None:
    """Tokens the string may take at most, estimated; None when nothing bounds it."""
    if "enum" in node or "const" in node or node.get("format") in BOUNDED_FORMATS:
        return 0
    max_length = node.get("maxLength")
    if isinstance(max_length, (int, float)) and not isinstance(max_length, bool):
        return -(-int(max_length) // CHARS_PER_TOKEN)
    pattern = node.get("pattern")
    if isinstance(pattern, str) and _bounded_pattern(pattern):
        return 0
    return None


def _bounded_pattern(pattern: str) -> bool:
    """Anchored at both ends (a JSON Schema pattern is a search) with no unbounded repetition."""
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        return False
    try:
        parsed = parse_regex(pattern)
    except (ParseError, RecursionError):
        return False
    return not any(isinstance(node, Rep) and node.max is None for node in walk(parsed.node))
