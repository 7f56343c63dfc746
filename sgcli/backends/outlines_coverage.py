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

import json

from sgcli.backends.disjoint import disjoint_types
from sgcli.backends.draft_reading import reads_tuples_from_items
from sgcli.backends.pattern_gaps import at
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
        if branch == "oneOf" and not disjoint_types(
            node["oneOf"], lambda ref: (resolve_ref(schema, ref) or (None,))[0]
        ):
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


_REF_DEPTH = 3  # outlines-core follows $refs nested this deep, then gives up on the property holding one


class _TooDeep(Exception):
    """outlines-core's $ref limit, met under a property: it leaves that property out and goes on."""


def unreadable_subschema(schema) -> tuple[tuple, object] | None:
    """(path, value) of the first subschema outlines-core cannot read, its "Unsupported JSON Schema
    structure ...", which quotes the value but says not where: a boolean (`additionalProperties: false`
    without `properties`, `"AnyValue": true`) or a list where it reads a subschema, or an object with none
    of the keywords it reads one by. Walked as its `to_regex` walks (the first recognised keyword, the
    `additionalProperties`/`items` of a `type`, local $refs); None where this walk finds none."""
    list_items = reads_tuples_from_items(schema)
    done: dict[tuple[int, int], object] = {}

    def walk(node, path: tuple, depth: int):
        """`inside`, once per subschema and $ref depth (a subschema many $refs reach is read once)."""
        if not isinstance(node, dict):
            return path, node
        key = (id(node), depth)
        if key not in done:
            try:
                done[key] = inside(node, path, depth)
            except _TooDeep as exc:
                done[key] = exc
        if isinstance(done[key], _TooDeep):
            raise done[key]
        return done[key]

    def inside(node: dict, path: tuple, depth: int):
        branch = _branch(node, list_items) if node else "empty"
        if branch is None:
            return path, node
        if branch == "properties" and isinstance(node["properties"], dict):
            for sub, sub_path in _children(node, branch, path):
                try:
                    hit = walk(sub, sub_path, depth)
                except _TooDeep:
                    continue
                if hit:
                    return hit
        elif branch == "$ref" and isinstance(node["$ref"], str):
            if depth > _REF_DEPTH:
                raise _TooDeep
            target = resolve_ref(schema, node["$ref"])
            if target is not None and not any(isinstance(step, int) for step in target[1]):
                return walk(target[0], target[1], depth + 1)  # (a list index it cannot follow: its own error)
        elif branch in ("allOf", "anyOf", "oneOf", "prefixItems"):
            for sub, sub_path in _children(node, branch, path, list_items):
                hit = walk(sub, sub_path, depth)
                if hit:
                    return hit
        elif branch == "type":
            return in_type(node, path, depth)
        return None

    def in_type(node: dict, path: tuple, depth: int):
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        for kind, key, most in (("array", "items", "maxItems"), ("object", "additionalProperties", "maxProperties")):
            bound = node.get(most)
            if kind not in types or key not in node or node[key] is True:
                continue
            if isinstance(bound, int) and not isinstance(bound, bool) and bound < 1:
                continue  # `[]` or `{}` outright, the subschema unread
            hit = walk(node[key], path + (key,), depth)
            if hit:
                return hit
        return None

    try:
        return walk(schema, (), 0)
    except (_TooDeep, RecursionError):  # its own error then, not this one
        return None


def unreadable_reason(schema, path: tuple, value) -> tuple[str, str]:
    """(why outlines-core cannot read `value` at `path`, what the user can do) in words."""
    other = "or use --backend llguidance or xgrammar"
    holder = at(schema, path[:-1]) if path else None
    if value is False and path and path[-1] == "additionalProperties":
        why = "outlines-core reads `additionalProperties: false` only beside `properties`"
        if isinstance(holder, dict) and "patternProperties" in holder:
            why += ", and has no `patternProperties`"
        return why, f"list the allowed properties under `properties`, {other}"
    if value is False and path and path[-1] == "items":
        return (
            "outlines-core reads no boolean subschema (`items: false`)",
            f"write `maxItems: 0` for an empty array, {other}",
        )
    if isinstance(value, bool):
        return (
            f"outlines-core reads no boolean subschema (`{json.dumps(value)}`)",
            f'write the types it allows (`"type": [...]`) instead, {other}'
            if value
            else f"remove it (it allows no value), {other}",
        )
    if isinstance(value, dict):
        keys = ", ".join(_BRANCHES[:-1]) + f" or {_BRANCHES[-1]}"
        return (
            f"outlines-core reads a subschema by one of type, {keys}, and this one has none",
            f"give it a `type`, {other}",
        )
    return "outlines-core reads a subschema only as an object", f"write a subschema there, {other}"
