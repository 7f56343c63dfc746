"""Where in a JSON Schema a backend's complaint points.

Grammar libraries say *what* they weakened or rejected ("oneOf ... falling back to anyOf
semantics", "Unknown format: bogus") but not *where*. This walks the schema, visiting
only real subschema positions (not, say, a property that happens to be named `allOf`),
and returns the JSON pointers of the locations the message can be about.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from sgcli.backends.base import CompileWarning
from sgcli.backends.diagnostics import native_message
from sgcli.backends.disjoint import disjoint_types
from sgcli.backends.schema_doc import lists_optional_properties
from sgcli.constraints.formats import user_format_regex
from sgcli.constraints.jsonpos import pointer_of, resolve_ref
from sgcli.constraints.spec import Kind

# Keywords whose value is one subschema / a map of subschemas / a list of subschemas.
_ONE = (
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "additionalItems",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
)
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


_CHILD_KEYS = frozenset(_ONE + _MAP + _LIST)
_ONE_SET, _MAP_SET, _LIST_SET = frozenset(_ONE), frozenset(_MAP), frozenset(_LIST)
# Each child keyword's place in the walk's order: `items` holding a list walks with the lists.
_RANK = {key: i for i, key in reversed(list(enumerate(_ONE + _MAP + _LIST)))}
_LIST_ITEMS_RANK = len(_ONE) + len(_MAP) + _LIST.index("items")


def iter_subschemas(schema, path: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """(path, subschema) for the schema and every subschema in it, depth first (keyword order
    above), with a stack rather than nested generators: every compile warning and error walks it.
    A node's child keywords come from one set intersection: 1.3x faster than looking up all 23 (169k
    subschemas of the JSON Schema Store sample and Kubernetes, same paths in the same order)."""
    if not isinstance(schema, dict):
        return
    stack = [(path, schema)]
    while stack:
        path, node = stack.pop()
        yield path, node
        keys = node.keys() & _CHILD_KEYS
        if not keys:
            continue
        children = []
        if len(keys) > 1:
            keys = sorted(
                keys, key=lambda k: _LIST_ITEMS_RANK if k == "items" and isinstance(node[k], list) else _RANK[k]
            )
        for key in keys:
            sub = node[key]
            if isinstance(sub, dict):
                if key in _MAP_SET:
                    children.extend((path + (key, name), c) for name, c in sub.items() if isinstance(c, dict))
                elif key in _ONE_SET:
                    children.append((path + (key,), sub))
            elif isinstance(sub, list) and key in _LIST_SET:
                children.extend((path + (key, i), c) for i, c in enumerate(sub) if isinstance(c, dict))
        stack.extend(reversed(children))


def find(schema, predicate: Callable[[dict], str | None]) -> list[tuple]:
    """Paths of every subschema for which `predicate` names a keyword (path includes it)."""
    hits = []
    for path, node in iter_subschemas(schema):
        key = predicate(node)
        if key is not None:
            hits.append(path + (key,))
    return hits


def _regex_in(message: str) -> str | None:
    m = re.search(r"(?:in regex|is ignored): (.*)$", message) or re.search(r"in regex /(.*)/$", message)
    return m.group(1) if m else None


def pattern_paths(schema, regex: str) -> list[tuple]:
    """Where a regex occurs as a `pattern` value or a `patternProperties` key."""
    out = find(schema, lambda n: "pattern" if n.get("pattern") == regex else None)
    for path, node in iter_subschemas(schema):
        props = node.get("patternProperties")
        if isinstance(props, dict) and regex in props:
            out.append(path + ("patternProperties", regex))
    return out


_LENGTHS = ("minLength", "maxLength")
_RANGE = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def find_all(schema, predicate: Callable[[dict], tuple[str, ...]]) -> list[tuple]:
    """`find` for a message about several keywords of one subschema: a path for each it names."""
    return [path + (key,) for path, node in iter_subschemas(schema) for key in predicate(node)]


def _lengths_beside(keyword: str) -> Callable[[dict], tuple[str, ...]]:
    """The length keywords of subschemas that also hold `keyword` (xgrammar drops them there)."""
    return lambda n: tuple(k for k in _LENGTHS if k in n) if keyword in n else ()


def _ignored_multiple_of(message: str) -> Callable[[dict], str | None]:
    """xgrammar ignores `multipleOf` of a number, and of an integer with a half-open range; a message it
    does not explain further counts every `multipleOf` (the checker then takes each: conservative)."""
    if "type:number" in message:
        return lambda n: "multipleOf" if "multipleOf" in n and n.get("type") != "integer" else None
    if "range" in message:
        return lambda n: "multipleOf" if "multipleOf" in n and any(k in n for k in _RANGE) else None
    return lambda n: "multipleOf" if "multipleOf" in n else None


def _property_counts(node: dict) -> tuple[str, ...]:
    return tuple(k for k in ("minProperties", "maxProperties") if k in node)


def _counts_beside_optional_properties(node: dict) -> tuple[str, ...]:
    """The property counts of a subschema where some property `properties` lists is optional (where the
    listed ones arrive merged from elsewhere, the rule below takes every count: conservative)."""
    return _property_counts(node) if lists_optional_properties(node) else ()


def _named_keywords(text: str) -> tuple[str, ...]:
    """ "minLength/maxLength" -> the keywords; anything that is not a keyword name gives none."""
    names = tuple(part for part in text.split("/") if re.fullmatch(r"\$?[a-zA-Z]+", part))
    return names if len(names) == len(text.split("/")) else ()


def _subschema_at(schema, ref: str) -> list[tuple]:
    """The path of the subschema a local reference names (URI-encoded, as llguidance writes it)."""
    found = resolve_ref(schema, ref)
    return [found[1]] if found else []


# (what the message says, how to find the places it can be about)
def _false_subschemas(schema) -> list[tuple]:
    """Paths of every `false` a subschema's applicator holds (`properties: {"legacy": false}`)."""
    hits = []
    for path, node in iter_subschemas(schema):
        for key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
            if isinstance(node.get(key), dict):
                hits += [(*path, key, name) for name, sub in node[key].items() if sub is False]
        for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if isinstance(node.get(key), list):
                hits += [(*path, key, i) for i, sub in enumerate(node[key]) if sub is False]
        keys = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
        hits += [(*path, key) for key in keys if node.get(key) is False]
    return hits


def _exclusive(schema, node: dict) -> bool:
    """Whether `node`'s `oneOf` branches are provably disjoint (`disjoint`): then its anyOf reading is exact."""
    return disjoint_types(node["oneOf"], lambda ref: (resolve_ref(schema, ref) or (None,))[0])


# a library's note that it writes oneOf as anyOf: nothing to say where every oneOf is exclusive
_ONE_OF_AS_ANY_OF = re.compile(r"\boneOf\b.*\banyOf\b", re.I | re.S)


def _fractional_integer_bound(node: dict) -> tuple[str, ...]:
    if node.get("type") != "integer":
        return ()
    bounds = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
    return tuple(k for k in bounds if isinstance(node.get(k), float) and not node[k].is_integer())


_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")

_RULES: list[tuple[re.Pattern, Callable[[object, re.Match], list[tuple]]]] = [
    # errors of xgrammar and llguidance that name no place (a held-out tour, 2026-12-07)
    (re.compile(r"Schema 'false' cannot accept any value"), lambda s, m: _false_subschemas(s)),
    (
        re.compile(r"propertyNames must be an object"),
        lambda s, m: find(s, lambda n: "propertyNames" if "propertyNames" in n else None),
    ),
    (re.compile(r"Integer constraint must be a whole number"), lambda s, m: find_all(s, _fractional_integer_bound)),
    (
        re.compile(r"minProperties is greater than the number of properties"),
        lambda s, m: find(s, lambda n: "minProperties" if "minProperties" in n else None),
    ),
    (
        re.compile(r"regex for (?:float|integer) range|nested parentheses/brackets"),
        lambda s, m: find_all(s, lambda n: tuple(k for k in _NUMBER_BOUNDS if k in n)),
    ),
    # llguidance names the subschema it was building ("Unable to determine if regex is empty: ...
    # while processing json-schema:///#/definitions/X"): the most precise place there is
    (re.compile(r"while processing json-schema:///(#/[^\s)]*)"), lambda s, m: _subschema_at(s, m.group(1))),
    # sgcli's own note on llguidance's compile (backends/unsatisfiable.py) names the places it made false
    (
        re.compile(r"^compiled with (/.*?) made false"),
        lambda s, m: [p for part in m.group(1).split(", ") for p in _subschema_at(s, "#" + part.split(" ")[0])],
    ),
    (
        re.compile(r"allOf with multiple", re.I),
        lambda s, m: find(s, lambda n: "allOf" if isinstance(n.get("allOf"), list) and len(n["allOf"]) > 1 else None),
    ),
    (
        re.compile(r"\boneOf\b"),
        lambda s, m: find(s, lambda n: "oneOf" if "oneOf" in n and not _exclusive(s, n) else None),
    ),
    (re.compile(r"\banyOf\b"), lambda s, m: find(s, lambda n: "anyOf" if "anyOf" in n else None)),
    (
        re.compile(r"(pattern|format) combined with minLength/maxLength"),
        lambda s, m: find_all(s, _lengths_beside(m.group(1))),
    ),
    (re.compile(r"ignoring multipleOf"), lambda s, m: find(s, _ignored_multiple_of(m.string))),
    (
        re.compile(r"Ignoring the length constraints of string", re.I),
        lambda s, m: find_all(s, lambda n: tuple(k for k in _LENGTHS if k in n)),
    ),
    # xgrammar reads no list `items`: sgcli respells a draft's tuple (draft_reading), but not beside a
    # `prefixItems` a reference keeps
    (
        re.compile(r"items must be a boolean or an object"),
        lambda s, m: (
            find(s, lambda n: "items" if isinstance(n.get("items"), list) and "prefixItems" in n else None)
            or find(s, lambda n: "items" if isinstance(n.get("items"), list) else None)
        ),
    ),
    (
        re.compile(r"Unknown format: (\S+)"),
        lambda s, m: find(s, lambda n: "format" if n.get("format") == m.group(1) else None),
    ),
    (
        re.compile(r"URI should either be '#' or start with '#/' but got (\S+)"),
        lambda s, m: find(s, lambda n: "$ref" if n.get("$ref") == m.group(1) else None),
    ),
    # llguidance keeps a property count only where every listed property is required (elsewhere its
    # grammar is stricter than the schema: it warns, and the warning belongs at the count)
    (
        re.compile(r"min/maxProperties only supported when all keys"),
        lambda s, m: find_all(s, _counts_beside_optional_properties) or find_all(s, _property_counts),
    ),
    (
        re.compile(r"Unimplemented keys: \[\"([^\"]+)\""),
        lambda s, m: find(s, lambda n: m.group(1) if m.group(1) in n else None),
    ),
    # any other "...; ignoring KEYWORD[/KEYWORD]": every place the keyword stands (conservative: the checker
    # then enforces each of them, where a rule above would have named only the ones really dropped)
    (
        re.compile(r"\bignoring (\S+?)\s*$", re.I),
        lambda s, m: find_all(s, lambda n: tuple(k for k in _named_keywords(m.group(1)) if k in n)),
    ),
]


def paths_for(schema, message: str) -> list[tuple]:
    """Key/index paths of the schema locations `message` can be about (may be empty)."""
    regex = _regex_in(message)
    if regex is not None:
        return pattern_paths(schema, regex)
    for rule, finder in _RULES:
        m = rule.search(message)
        if m:
            return finder(schema, m)
    return []


def pointers_for(schema, message: str) -> list[str]:
    """The same locations as JSON pointers."""
    return [pointer_of(p) for p in paths_for(schema, message)]


def _defined_by_the_user(message: str) -> bool:
    """An unknown-format warning about a format `--format NAME=REGEX` defined is noise: sgcli's
    checker enforces that format (its note says so)."""
    unknown = re.search(r"Unknown format: (\S+)", message)
    return unknown is not None and user_format_regex(unknown.group(1)) is not None


def compile_warnings(spec, lines: list[str], clean=None, schema=None) -> list:
    """Native warning lines (captured log, or the library's own list) -> deduplicated
    `CompileWarning`s, each at its schema pointer (one per location it can be about) when the
    spec is a JSON Schema. `clean` turns a line into the message (default: `native_message`);
    `schema`: the spec's parsed schema, when the caller has it (else parsed here, if needed)."""

    if lines and schema is None and spec.kind is Kind.JSON_SCHEMA:  # parsed only with something to place
        try:
            schema = spec.schema()
        except Exception:  # malformed schemas were rejected before compiling; stay robust
            schema = None
    if spec.kind is not Kind.JSON_SCHEMA:
        schema = None
    out: dict = {}
    for line in lines:
        message = (clean or native_message)(line)
        if not message or _defined_by_the_user(message):
            continue
        pointers = pointers_for(schema, message) if schema is not None else []
        if not pointers and schema is not None and _ONE_OF_AS_ANY_OF.search(message):
            continue
        for pointer in pointers or [None]:
            out[CompileWarning(message, pointer)] = None
    return list(out)
