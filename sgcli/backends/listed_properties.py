"""When generating, an object that lists its properties takes only those.

JSON Schema leaves an object open to any other key unless it says `additionalProperties: false`,
and almost no real schema says it. A small model given an open object invents keys until
`--max-tokens` (`"unit_price_per_box_per_box": 1.5, ...`: 5 of 14 extraction runs of the default
model, 2026-12-06); with the object closed the same runs ended in 9-21 tokens. Outputs stay valid:
a closed object is a subset of the open one. xgrammar's strict mode (vLLM's default) and OpenAI's
strict outputs close objects the same way; a schema that wants other keys says so
(`additionalProperties: true`, `patternProperties`, `unevaluatedProperties`) and stays open.

Closing is only done where it narrows and never empties: an object whose instance no other subschema
also constrains. One inside `oneOf` (closing a branch can make an instance match exactly one branch
that matched two: wider), `not`, `allOf` of several parts, `if`/`then`/`else`, dependent schemas,
beside `$ref` or a sibling `anyOf`, or whose `required` names an unlisted key stays as written; a
schema with a keyword this reading cannot follow (a non-local `$ref`) is left whole.
"""

from __future__ import annotations

import copy
from urllib.parse import unquote

from sgcli.backends.schema_warnings import iter_subschemas

# Any of these anywhere: the schema is left as it is (what they combine is not followed here)
_LEAVE_WHOLE = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
        "unevaluatedItems",
        "$dynamicRef",
        "$recursiveRef",
        "extends",  # draft 3's allOf
        "disallow",  # draft 3's not
    }
)
_OPEN = ("additionalProperties", "patternProperties", "unevaluatedProperties")
_COMBINING = frozenset({"allOf", "anyOf", "oneOf", "$ref"})
# a node with one of these constrains the object it shares with its anyOf branches
_OBJECT_WORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "dependentRequired",
    }
)


def close_listed_objects(schema):
    """`schema` with `additionalProperties: false` on each object that lists `properties` and may be
    closed (module docstring); the same object where nothing is closed."""
    if not isinstance(schema, dict):
        return schema
    nodes = dict(iter_subschemas(schema))
    if any(_LEAVE_WHOLE & node.keys() or _many_parts(node) for node in nodes.values()):
        return schema
    blocked: set[str] = set()
    while True:  # a $ref from a shared place shares its target, and what that target refers to
        free = _free_paths(nodes, blocked)
        if free is None:
            return schema
        now = {
            _ref_path(node["$ref"]) for path, node in nodes.items() if "$ref" in node and not _alone(path, node, free)
        }
        if now <= blocked:
            break
        blocked |= now
    closing = [path for path, node in nodes.items() if path in free and _closable(node)]
    if not closing:
        return schema
    result = copy.deepcopy(schema)
    copies = dict(iter_subschemas(result))
    for path in closing:
        copies[path]["additionalProperties"] = False
    return result


def _many_parts(node: dict) -> bool:
    parts = node.get("allOf")
    return parts is not None and not (isinstance(parts, list) and len(parts) == 1)


def _free_paths(nodes: dict, blocked: set[str]) -> set[tuple] | None:
    """The paths of subschemas whose instance nothing else constrains; None where a `$ref` is not
    a pointer into this schema."""
    free = set()
    for path, node in nodes.items():  # depth first: a parent comes before its children
        ref = node.get("$ref")
        if ref is not None and (not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/"))):
            return None  # another document, or an anchor (`#name`): what it names is not followed here
        if _pointer(path) in blocked:
            continue
        if len(path) >= 2 and path[-2] in ("anyOf", "allOf"):
            parent = path[:-2]
            if parent in free and not (_OBJECT_WORDS & nodes[parent].keys()):
                free.add(path)
        elif len(path) >= 2 and path[-2] == "oneOf":
            continue
        else:  # the root, a property's value, an item, a definition: an instance of its own
            free.add(path)
    return free


def _alone(path: tuple, node: dict, free: set[tuple]) -> bool:
    """Whether a `$ref` node stands for its target alone (no object keyword beside it, nothing shared)."""
    return path in free and not (_OBJECT_WORDS & node.keys())


def _closable(node: dict) -> bool:
    listed = node.get("properties")
    if not isinstance(listed, dict) or not listed or _COMBINING & node.keys():
        return False
    if any(key in node for key in _OPEN) or "dependentRequired" in node:
        return False
    required = node.get("required")
    if isinstance(required, list) and any(name not in listed for name in required):
        return False
    least = node.get("minProperties")
    return not (isinstance(least, int) and least > len(listed))


def _ref_path(ref: str) -> str:
    """The pointer a local `$ref` names, as `_pointer` spells paths ("#/$defs/A%20B" -> "/$defs/A B")."""
    return unquote(ref[1:])


def _pointer(path: tuple) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)
