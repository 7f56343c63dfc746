"""Leaving out the places that can only hold an unsatisfiable subschema, so that one impossible
`anyOf` branch does not sink a whole schema.

llguidance refuses a schema when any subschema it reaches can hold no value ("Unsatisfiable
schema: ... while processing json-schema:///#/definitions/X"), even one reached only as a branch
of an `anyOf`/`oneOf` or as an optional property, where it changes nothing: no instance takes that
branch, no instance holds that property. dbt-core's own `dbt_project.yml` schema was refused so
(its `BigqueryPartitionConfig` requires `field`, and every branch of its `anyOf` forbids it), and
no backend could generate for it. Such a branch becomes `false`, and such a property `false` (it
may not appear): the schema has the same instances, every pointer into it still names the same
place, and sgcli's checker still validates against the schema as written. A subschema reached
where it must hold a value (a required property, an `allOf`) leaves the refusal as it was.
"""

from __future__ import annotations

import copy
import re
from urllib.parse import unquote

from sgcli.constraints.jsonpos import pointer_parts

_UNSATISFIABLE = re.compile(r"Unsatisfiable schema\b.*?while processing json-schema:///#(\S*)", re.S)


def unsatisfiable_pointer(message: str) -> str | None:
    """The JSON pointer of the subschema an llguidance error calls unsatisfiable, if it is one."""
    m = _UNSATISFIABLE.search(message)
    return None if m is None else unquote(m.group(1)).rstrip(").,")


def left_out(schema, pointer: str) -> tuple[object, list[str]] | None:
    """(a copy of `schema` with each `anyOf`/`oneOf` branch and optional property that can only hold
    the subschema at `pointer` made `false`, the pointers of those places), or None where there is
    none (or where every branch of some `anyOf` would go: the refusal is then right)."""
    out = copy.deepcopy(schema)
    places: list[str] = []
    # (node, its pointer, whether a `#...` reference there is read against the root: not below an `$id`)
    stack: list[tuple[object, str, bool]] = [(out, "", True)]
    while stack:
        node, at, rooted = stack.pop()
        if isinstance(node, list):
            stack.extend((v, f"{at}/{i}", rooted) for i, v in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        rooted = rooted and (at == "" or not any(isinstance(node.get(k), str) for k in ("$id", "id")))
        for key in ("anyOf", "oneOf"):
            branches = node.get(key)
            if isinstance(branches, list):
                gone = [i for i, b in enumerate(branches) if _holds_only(b, f"{at}/{key}/{i}", pointer, rooted)]
                if gone and len(gone) < len(branches):
                    for i in gone:
                        branches[i] = False
                        places.append(f"{at}/{key}/{i}")
        props, required = node.get("properties"), node.get("required")
        if isinstance(props, dict):
            required = set(required) if isinstance(required, list) else set()
            for name, sub in props.items():
                where = f"{at}/properties/{_escaped(name)}"
                if name not in required and _holds_only(sub, where, pointer, rooted):
                    props[name] = False
                    places.append(where)
        inner = [(k, v) for k, v in node.items() if isinstance(v, (dict, list)) and k not in _DATA]
        stack.extend((v, f"{at}/{_escaped(k)}", rooted) for k, v in inner)
    return (out, places) if places else None


# keywords whose values are instances, never schemas (a property of that name is passed over too: no harm)
_DATA = {"enum", "const", "default", "examples"}


def _holds_only(sub, at: str, pointer: str, rooted: bool) -> bool:
    """Whether the subschema `sub` (at `at`) is the one at `pointer`, or only a `$ref` to it (`rooted`: a
    `#...` reference there names the root's pointer, not one inside an embedded `$id`'s resource)."""
    if at == pointer:
        return True
    if not rooted or not isinstance(sub, dict) or not isinstance(sub.get("$ref"), str):
        return False
    ref = unquote(sub["$ref"])
    asserting = [k for k in sub if k not in _ANNOTATIONS]
    return not asserting and ref.startswith("#") and ref[1:] == pointer and bool(pointer_parts(pointer))


# keywords beside a `$ref` that hold no assertion of their own
_ANNOTATIONS = {"$ref", "description", "title", "default", "examples", "$comment", "deprecated", "readOnly"}


def _escaped(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
