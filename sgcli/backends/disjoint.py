"""When `oneOf` means what `anyOf` means: branches no instance can match two of.

xgrammar and outlines-core write `oneOf` as `anyOf` (an instance may match several branches), which
weakens it only where branches overlap. Proving they cannot lets a schema whose `oneOf` is in fact
exclusive (a union of distinct types, pydantic's discriminated unions) go through without a gap.
"""

from __future__ import annotations


def disjoint_types(branches, resolve=None) -> bool:
    """Branches no instance can match two of, so that anyOf is exactly oneOf: each admits one distinct
    JSON type, or each is an object whose required property holds a constant of its own (pydantic's
    discriminated unions, `{"oneOf": [{"$ref": "#/$defs/Cat"}, ...]}`: `resolve(ref)` finds a branch
    a `$ref` names; without it only inline branches are read)."""
    if not isinstance(branches, list):
        return False
    types = [b.get("type") if isinstance(b, dict) else None for b in branches]
    if all(isinstance(t, str) for t in types) and len(set(types)) == len(types):
        return not {"integer", "number"} <= set(types)
    return _tagged(branches, resolve)


_ANNOTATIONS = {"title", "description", "$comment", "examples", "default"}


def _tagged(branches: list, resolve) -> bool:
    """Each branch an object (`"type": "object"`) that requires one same property, listed with a `const`
    (or a one-value `enum`) no other branch gives it: an instance has one value there, so one branch."""
    nodes = [_through_ref(b, resolve) for b in branches]
    if len(nodes) < 2 or not all(isinstance(n, dict) and n.get("type") == "object" for n in nodes):
        return False
    required = nodes[0].get("required")
    for name in required if isinstance(required, list) else ():
        tags = [_tag(n, name, resolve) for n in nodes]
        if None not in tags and len(set(tags)) == len(tags):
            return True
    return False


def _through_ref(node, resolve, hops: int = 8):
    """`node`, or what its lone `$ref` names (annotations beside it change nothing)."""
    while hops and isinstance(node, dict) and "$ref" in node and set(node) - {"$ref"} <= _ANNOTATIONS:
        node = resolve(str(node["$ref"])) if resolve is not None else None
        hops -= 1
    return node


def _tag(node: dict, name: str, resolve):
    """The one value `node` requires property `name` to hold (None: not one, or not required there):
    strings and integers, as JSON compares them (1 and 1.0 are one number, true is no number)."""
    required, listed = node.get("required"), node.get("properties")
    if not isinstance(required, list) or name not in required or not isinstance(listed, dict):
        return None
    prop = _through_ref(listed.get(name), resolve)
    if not isinstance(prop, dict):
        return None
    values = [prop["const"]] if "const" in prop else prop.get("enum")
    if not isinstance(values, list) or len(values) != 1:
        return None
    value = values[0]
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
        return ("number", float(value))
    return None
