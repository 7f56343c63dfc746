"""xgrammar's side of a JSON Schema: the schema text it is given (`schema_text`), its layout keyword
arguments, and its grammar with strings that are JSON (`json_safe`)."""

from __future__ import annotations

import json
import re

from sgcli.backends.draft_reading import as_its_draft_reads, tuples_as_prefix_items
from sgcli.backends.pattern_gaps import PatternGap, with_patterns
from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.spec import ConstraintSpec, JsonOptions

# How xgrammar prints the characters of its JSON strings: a length-bounded one (`"maxLength": 3`) takes
# raw control characters (`"\x01\x02"` was accepted: not JSON), and every one takes the UTF-8 form of a
# surrogate (bytes ED B8 BA, which no UTF-8 decoder reads: 2 of 2,917 random walks of its grammars), the
# first character of an additional property's name too (`[^\0-\x1f\"\\\r\na]`, beside a property `a`:
# `{"\xed\xa0\x80": "x"}` was taken; 2026-12-06). Each class that opens so is narrowed where it opens.
_RAW_OPENINGS = re.compile(r'\[\^(?:\\0-\\x1f)?\\"\\\\\\r\\n(?!\\ud800-\\udfff)')
_JSON_OPENING = '[^\\0-\\x1f\\"\\\\\\r\\n\\ud800-\\udfff'
# Its escapes as it prints them, and the ones kept when generating (json_layout.UNIQUE_ESCAPES: one
# spelling per character, so a property name cannot be written past its rule as `"\u0061"`).
_ESCAPE_RULE = re.compile(r"^basic_escape ::= .*$", re.MULTILINE)
_UNIQUE_ESCAPE_RULE = 'basic_escape ::= (([\\"\\\\bfnrt]))'


def json_schema_grammar(text: str, options: JsonOptions):
    """xgrammar's Grammar for a JSON Schema text, its strings JSON (`json_safe`)."""
    import xgrammar as xgr

    return json_safe(xgr.Grammar.from_json_schema(text, **json_format_kwargs(options)), options.for_generation)


def json_safe(grammar, unique_escapes: bool = False):
    """`grammar` with its strings' characters narrowed to what JSON takes unescaped, as valid UTF-8
    (and, with `unique_escapes`, its escapes to one spelling per character: for generating)."""
    import xgrammar as xgr

    printed = json_safe_ebnf(grammar, unique_escapes)
    return grammar if printed is None else xgr.Grammar.from_ebnf(printed, root_rule_name="root")


def json_safe_ebnf(grammar, unique_escapes: bool = False) -> str | None:
    """`json_safe`'s grammar as EBNF text, or None where `grammar` has nothing to narrow."""
    printed = str(grammar)
    narrowed = _RAW_OPENINGS.sub(lambda _: _JSON_OPENING, printed)
    if unique_escapes:
        narrowed = _ESCAPE_RULE.sub(lambda _: _UNIQUE_ESCAPE_RULE, narrowed)
    return None if narrowed == printed else narrowed


def compile_json_safe(compiler, grammar, unique_escapes: bool = False):
    """`compiler.compile_grammar(json_safe(grammar))`, the narrowed grammar handed over as text: xgrammar
    then reads it once, and its in-memory cache answers by the text before reading it (an object is
    printed again for the key). Measured on Kubernetes' 59 schemas, cold: p50 6.9 against 8.3 ms
    (the library's own compile, unnarrowed: 6.2); a repeat 0.04 against 0.94 ms."""
    printed = json_safe_ebnf(grammar, unique_escapes)
    if printed is None:
        return compiler.compile_grammar(grammar)
    return compiler.compile_grammar(printed, root_rule_name="root")


def json_format_kwargs(o: JsonOptions) -> dict:
    """sgcli's JSON layout options as xgrammar keyword arguments."""
    return {
        "any_whitespace": o.whitespace == "flexible" and o.indent is None,
        "indent": o.indent,
        "separators": (",", ":") if o.whitespace == "compact" and o.indent is None else None,
        # strict_mode (no unlisted properties/items) for generation: on the JSON-Schema-Test-Suite it
        # accepts fewer invalid instances and never compiles for seconds; off for dry runs, where
        # rejecting valid instances would be a false verdict (benchmarks/xgrammar_strict_mode.py)
        "strict_mode": o.strict_properties or o.for_generation,
        "max_whitespace_cnt": o.max_whitespace,
    }


def _needs_items(node) -> bool:
    """An array subschema without `items` that must hold more than its `prefixItems` (`minItems`, `contains`):
    xgrammar's strict mode allows it no more items, and refused `{"type": "array", "minItems": 2}` with
    "minItems is greater than the number of prefixItems, but additional items are not allowed"."""
    if not isinstance(node, dict) or "items" in node:
        return False
    kind = node.get("type")
    if not (kind is None or kind == "array" or (isinstance(kind, list) and "array" in kind)):
        return False
    prefix = node.get("prefixItems") if isinstance(node.get("prefixItems"), list) else []
    least = node.get("minItems")
    return "contains" in node or (isinstance(least, int) and not isinstance(least, bool) and least > len(prefix))


def _needs_properties(node) -> bool:
    """An object subschema that must hold more properties than it lists, with nothing said of the others:
    strict mode allows it no other, and refused `{"type": "object", "minProperties": 1}` (a schema's
    "non-empty metadata") with "minProperties is greater than the number of properties, but additional
    properties aren't allowed: 1 > 0", no pointer (a held-out tour, 2026-12-07)."""
    if not isinstance(node, dict) or "additionalProperties" in node or "patternProperties" in node:
        return False
    kind = node.get("type")
    if not (kind is None or kind == "object" or (isinstance(kind, list) and "object" in kind)):
        return False
    listed = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    least = node.get("minProperties")
    return isinstance(least, int) and not isinstance(least, bool) and least > len(listed)


def _closed_too_soon(schema) -> bool:
    """Whether strict mode would close an array or an object that must hold more than it lists."""
    from sgcli.backends.schema_warnings import iter_subschemas

    return any(_needs_items(node) or _needs_properties(node) for _, node in iter_subschemas(schema))


def _has_name_patterns(node) -> bool:
    """A subschema with `patternProperties`, which xgrammar reads over-strictly: a name must match the
    whole pattern (`^x-` took only `x-`), and the `additionalProperties` beside it was dropped for the
    other names, so `{"a": 1, "x-foo": 2}` was refused where jsonschema takes it (2026-12-06)."""
    return (
        isinstance(node, dict) and isinstance(node.get("patternProperties"), dict) and bool(node["patternProperties"])
    )


def _name_pattern_paths(schema) -> list[tuple]:
    from sgcli.backends.schema_warnings import iter_subschemas

    return [path for path, node in iter_subschemas(schema) if _has_name_patterns(node)]


def _open_name_patterns(schema) -> None:
    """Each such subschema without its `patternProperties` and open to every other name: the grammar
    then takes every name the schema does (the schema checker enforces the rest: keyword_readings)."""
    from sgcli.backends.schema_warnings import iter_subschemas

    for _, node in list(iter_subschemas(schema)):
        if _has_name_patterns(node):
            del node["patternProperties"]
            if _OBJECT_KEYWORDS & node.keys():  # open (strict mode closes an object that does not say so)
                node["additionalProperties"] = True
            # else nothing says "object": `additionalProperties` alone would make xgrammar refuse every
            # other type, which a schema of patternProperties alone allows


_OBJECT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "unevaluatedProperties",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
    }
)


def name_pattern_warnings(schema) -> list:
    """One warning per subschema opened by `_open_name_patterns`: a compile that weakens a keyword says so
    at its pointer (lint, records), even where sgcli's checker makes up for it."""
    from sgcli.backends.base import CompileWarning
    from sgcli.constraints.jsonpos import pointer_of

    return [
        CompileWarning(
            "`patternProperties` is read over-strictly by xgrammar (a name must match the whole pattern): its grammar "
            "takes every property name here, and sgcli's schema checker enforces patternProperties and "
            "additionalProperties",
            pointer_of(path + ("patternProperties",)),
        )
        for path in _name_pattern_paths(schema)
    ]


def schema_text(spec: ConstraintSpec, schema, gaps: list[PatternGap]) -> str:
    """The schema text xgrammar gets: the file's, or a copy without `gaps`, read as its draft reads it
    (`draft_reading`: a draft-7 tuple as `prefixItems`), open where it names
    properties by pattern (`_open_name_patterns`), and with draft 4's boolean
    `exclusiveMinimum`/`exclusiveMaximum` in their later form, which xgrammar reads only
    ("Value must be a number": OpenAPI 3.0's own schema)."""
    if schema is None:  # not a JSON Schema: unused
        return spec.text
    draft = dialect_of(schema).cls.__name__
    bounds = '"exclusiveM' in spec.text and draft in ("Draft3Validator", "Draft4Validator")
    strict = json_format_kwargs(spec.json_options)["strict_mode"]
    # keywords its draft ignores (xgrammar reads them), and its tuples as 2020-12 spells them
    read = tuples_as_prefix_items(as_its_draft_reads(schema, spec.text), spec.text)
    drafted = read is not schema
    closed = (
        strict
        and any(k in spec.text for k in ('"minItems"', '"contains"', '"minProperties"'))
        and _closed_too_soon(read)
    )
    named = '"patternProperties"' in spec.text and bool(_name_pattern_paths(schema))
    if not (gaps or bounds or closed or drafted or named):
        return spec.text
    schema = with_patterns(schema, gaps)
    if drafted:  # after the patterns, whose paths are the file's
        schema = tuples_as_prefix_items(as_its_draft_reads(schema))
    if named:
        _open_name_patterns(schema)
    if closed:  # strict mode reads a missing `items` as none allowed: an array that must hold some refused
        from sgcli.backends.schema_warnings import iter_subschemas

        for _, node in iter_subschemas(schema):
            if _needs_items(node):
                node["items"] = True
            if _needs_properties(node):
                node["additionalProperties"] = True
    if bounds:
        from sgcli.backends.schema_warnings import iter_subschemas

        for _, node in iter_subschemas(schema):
            for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
                if isinstance(node.get(exclusive), bool):
                    if node.pop(exclusive) and isinstance(node.get(bound), (int, float)):
                        node[exclusive] = node.pop(bound)
    return json.dumps(schema)
