"""Which JSON Schema keywords outlines-core silently drops, and where.

outlines-core turns each subschema into a regex by its *first* recognised keyword
(properties, allOf, anyOf, oneOf, prefixItems, enum, const, $ref, type) and ignores
every other keyword of that subschema: `minimum` next to `type: integer`, `pattern`
next to `maxLength`, `required` on an object without `properties`... An output can then
break the schema although the backend compiled it. This walks the schema the way
outlines-core does (its `json_schema/parsing.rs`) and reports each dropped keyword with
its JSON pointer, so sgcli can warn instead of weakening the schema in silence. A tuple of drafts 3 to
2019-09 (a list `items`) reaches it as `prefixItems` (`draft_reading.tuples_as_prefix_items`): it is
read here where the file has it.
"""

from __future__ import annotations

from sgcli.backends.draft_reading import reads_tuples_from_items
from sgcli.backends.schema_doc import COMPANIONS
from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.jsonpos import pointer_of, resolve_ref

_BRANCHES = ("properties", "allOf", "anyOf", "oneOf", "prefixItems", "enum", "const", "$ref")
# Keywords that never constrain an instance, or only narrow what outlines-core accepts.
_HARMLESS = {
    "title",
    "description",
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "default",
    "examples",
    "$defs",
    "definitions",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "depth",
    "minDigits",
    "maxDigits",
    "minDigitsInteger",
    "maxDigitsInteger",
    "minDigitsFraction",
    "maxDigitsFraction",
    "minDigitsExponent",
    "maxDigitsExponent",
}
_HONOURED = {
    "properties": {"properties", "required", "type", "additionalProperties", "unevaluatedProperties"},
    "allOf": {"allOf"},
    "anyOf": {"anyOf"},
    "oneOf": {"oneOf"},
    "prefixItems": {"prefixItems", "type", "items", "additionalItems", "unevaluatedItems"},
    "enum": {"enum", "type"},
    "const": {"const", "type"},
    "$ref": {"$ref"},
}
_BY_TYPE = {
    "number": {"type"},
    "integer": {"type"},
    "boolean": {"type"},
    "null": {"type"},
    "array": {"type", "items", "minItems", "maxItems"},
    "object": {"type", "additionalProperties", "minProperties", "maxProperties"},
}


def _string_keywords(node: dict) -> set[str]:
    if "minLength" in node or "maxLength" in node:
        return {"type", "minLength", "maxLength"}
    if "pattern" in node:
        return {"type", "pattern"}
    return {"type", "format"}


def _honoured(node: dict, branch: str) -> set[str]:
    if branch != "type":
        return _HONOURED[branch]
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    out: set[str] = set()
    for t in (t for t in types if isinstance(t, str)):  # a malformed `type` honours nothing
        out |= _string_keywords(node) if t == "string" else _BY_TYPE.get(t, {"type"})
    return out


def _tuple_key(node: dict, list_items: bool) -> str | None:
    """Where `node`'s tuple is: `prefixItems`, or a list `items` where the draft reads that as one."""
    if "prefixItems" in node:
        return "prefixItems"
    return "items" if list_items and isinstance(node.get("items"), list) else None


def _branch(node: dict, list_items: bool) -> str | None:
    """The keyword outlines-core reads `node` by (a list `items` in a draft's tuple stands for prefixItems)."""
    for key in _BRANCHES:
        if key in node or (key == "prefixItems" and _tuple_key(node, list_items)):
            return key
    return "type" if "type" in node else None


def _children(node: dict, branch: str, path: tuple, list_items: bool = False):
    key = _tuple_key(node, list_items) if branch == "prefixItems" else branch
    if branch == "properties" and isinstance(node.get("properties"), dict):
        for name, sub in node["properties"].items():
            yield sub, path + ("properties", name)
    elif branch in ("allOf", "anyOf", "oneOf", "prefixItems") and isinstance(node.get(key), list):
        for i, sub in enumerate(node[key]):
            yield sub, path + (key, i)
    elif branch == "type":
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                yield node[key], path + (key,)


def disjoint_types(branches) -> bool:
    """Branches that each admit one distinct JSON type cannot overlap: anyOf is then exactly oneOf."""
    if not isinstance(branches, list):
        return False
    types = [b.get("type") if isinstance(b, dict) else None for b in branches]
    if not all(isinstance(t, str) for t in types) or len(set(types)) != len(types):
        return False
    return not {"integer", "number"} <= set(types)


def dropped_keywords(schema) -> list[tuple[str, str]]:
    """[(JSON pointer, explanation)] for every keyword outlines-core ignores or weakens."""
    found: list[tuple[str, str]] = []
    seen: set[tuple] = set()
    # only keys the draft validates by count: Snowplow's `self` or an `x-` extension constrains nothing
    validating = (set(dialect_of(schema).cls.VALIDATORS) | set(COMPANIONS)) - _HARMLESS
    list_items = reads_tuples_from_items(schema)

    def visit(node, path: tuple) -> None:
        if not isinstance(node, dict) or not node or path in seen:
            return
        seen.add(path)
        branch = _branch(node, list_items)
        if branch is None:
            found.extend(
                (pointer_of(path + (k,)), f"'{k}' is ignored by outlines_core") for k in node if k in validating
            )
            return
        for key in sorted((set(node) & validating) - _honoured(node, branch)):
            found.append((pointer_of(path + (key,)), f"'{key}' is ignored by outlines_core"))
        if branch == "oneOf" and not disjoint_types(node["oneOf"]):
            found.append((pointer_of(path + ("oneOf",)), "oneOf is enforced as anyOf by outlines_core"))
        if branch == "$ref":
            target, target_path = resolve_ref(schema, str(node["$ref"])) or (None, None)
            if target is not None:
                visit(target, target_path)
        for sub, sub_path in _children(node, branch, path, list_items):
            visit(sub, sub_path)

    visit(schema, ())
    return found


def concatenated_all_of(schema) -> str | None:
    """Pointer of an allOf with several subschemas: outlines-core concatenates their regexes,
    so no output could ever be valid JSON."""
    for path, node in iter_subschemas(schema):
        branch = _branch(node, False)
        if branch == "allOf" and isinstance(node["allOf"], list) and len(node["allOf"]) > 1:
            return pointer_of(path + ("allOf",))
    return None


def ungrouped_empty_schema(schema) -> str | None:
    """Pointer of an empty subschema `{}` that outlines-core would splice in ungrouped.

    outlines-core compiles `{}` to the alternation `(bool)|(null)|...` without parentheses;
    as a property value, a tuple entry or an additionalProperties value the `|` then splits
    the surrounding regex, so e.g. `prefixItems: [{}], items: false` accepts `[1,"foo"]`
    and an object schema accepts a bare `null`. (Grouping it by hand is correct but makes
    the DFA explode: minutes for a tuple of three.)
    """
    list_items = reads_tuples_from_items(schema)
    for path, node in iter_subschemas(schema):
        for name, sub in (node.get("properties") or {}).items() if isinstance(node.get("properties"), dict) else ():
            if sub == {}:
                return pointer_of(path + ("properties", name))
        key = _tuple_key(node, list_items)
        for i, sub in enumerate(node[key]) if key and isinstance(node[key], list) else ():
            if sub == {}:
                return pointer_of(path + (key, i))
        if node.get("additionalProperties") == {} and "properties" not in node:
            return pointer_of(path + ("additionalProperties",))
    return None
