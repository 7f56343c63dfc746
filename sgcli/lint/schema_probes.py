"""For each keyword of a schema, an instance that violates that keyword and nothing else.

Start from a valid instance holding every optional part that leads to the subschema with the
keyword (and no other: on Kubernetes' Pod, 68 s against 4 s); there, swap in a value that breaks
the keyword's constraint. A candidate counts only
when the `jsonschema` library agrees on both halves: the whole instance is invalid, and
it becomes valid once that one keyword is deleted from the schema. Keywords for which
no such instance is found are simply not probed (no verdict rather than a wrong one).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.dialects.shortest import regex_sample
from sgcli.lint.schema_instances import Impossible, InstanceBuilder, count, validator

_ANY_VALUES = ["zz_not_listed", 987654321, 0.5, None, True, [], {}]


@dataclass(frozen=True)
class Probe:
    path: tuple  # schema path to the keyword, e.g. ("properties", "age", "minimum")
    keyword: str
    instance: object  # violates only `keyword`
    value: object  # what was swapped in at the subschema holding the keyword


def _numbers(n, kw, v):
    step = n.get("multipleOf") if isinstance(n.get("multipleOf"), (int, float)) else 1
    x = n[kw]
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return []
    if kw == "minimum":
        return [x - step, math.ceil(x) - 1, x - 0.5, x - 2 * step]
    if kw == "exclusiveMinimum":
        return [x, x - step, math.floor(x)]
    if kw == "maximum":
        return [x + step, math.floor(x) + 1, x + 0.5, x + 2 * step]
    if kw == "exclusiveMaximum":
        return [x, x + step, math.ceil(x)]
    if kw == "multipleOf" and isinstance(v, (int, float)):
        return [v + 1, v + x / 2, v + 0.5, x + 1, 1]
    return []


def _strings(n, kw, v):
    if not isinstance(v, str):
        return []
    lo, x = count(n, "minLength"), n[kw]
    if kw in ("minLength", "maxLength"):
        x = count(n, kw, -1)
    if kw == "minLength" and x > 0:
        return [v[: x - 1], "a" * (x - 1)]
    if kw == "maxLength" and x >= 0:
        return [v + (v[-1:] or "a") * (x + 1 - len(v)), "a" * (x + 1)]
    if kw == "pattern":
        sizes = sorted({max(lo, 1), max(lo, 3), len(v)})
        # beside `format`, a probe must keep the format valid, or the format (not the pattern)
        # is what a backend's rejection shows
        return _FORMAT_VALUES.get(n.get("format"), []) + [ch * size for size in sizes for ch in "!a0~Z "] + [""]
    if kw == "format":
        return [f"not a {x}", "x", "2024-13-45T99:99:99", "999.1.1.1"]
    return []


def _arrays(n, kw, v, builder: InstanceBuilder):
    if not isinstance(v, list):
        return []
    x = count(n, kw, -1) if kw in ("minItems", "maxItems") else n[kw]
    items = n.get("items", True)
    if kw == "minItems" and x > 0:
        return [v[: x - 1]]
    if kw == "maxItems" and x >= 0:
        extra = [_try(builder, items, len(v) + i) for i in range(x + 1 - len(v))] if items is not False else []
        grown = v + [e for e in extra if e is not _NONE]
        return [grown[: x + 1]] if len(grown) > x else []
    if kw == "uniqueItems" and x is True:
        return [v + [v[0]]] if v else []
    if kw == "items" and items is False:
        return [v + [0], v + [None]]
    if kw == "contains":
        keep = [e for e in v if not builder.local(x).is_valid(e)]
        return [keep, []]
    return []


def _objects(n, kw, v, builder: InstanceBuilder):
    if not isinstance(v, dict):
        return []
    x = count(n, kw, -1) if kw in ("minProperties", "maxProperties") else n[kw]
    required = list(n.get("required") or [])
    if kw == "required" and required:
        return [{k: val for k, val in v.items() if k != name} for name in required if name in v]
    if kw == "additionalProperties":
        return [{**v, "zz_extra": value} for value in (1, "x", None, True, [], {})]
    if kw == "minProperties" and x > 0:
        keys = sorted(v, key=lambda k: k in required)  # drop optional keys first
        return [{k: v[k] for k in keys[len(keys) - (x - 1) :]}] if len(keys) >= x else []
    if kw == "maxProperties" and x >= 0:
        grown = dict(v)
        for i in range(x + 1 - len(v)):
            grown[f"zz_extra{i}"] = 1
        return [grown]
    if kw == "dependentRequired" and isinstance(x, dict):
        return [{k: val for k, val in v.items() if k not in deps} for name, deps in x.items() if name in v]
    if kw == "propertyNames":
        return [{**v, key: 1} for key in ("", "!!", "A" * 64, "0", "zz")]
    return []


# Values valid for a format, several shapes each, to break a `pattern` beside the format.
_FORMAT_VALUES = {
    "date-time": ["1999-12-31T23:59:59Z", "2024-06-15T12:00:00+02:00", "2001-02-03T04:05:06.789Z"],
    "date": ["1999-12-31", "2001-02-03", "2030-10-20"],
    "time": ["23:59:59Z", "12:00:00+02:00"],
    "email": ["zz@zz.zz", "Q_q.9@example.org", "x+y@sub.example.net"],
    "hostname": ["zz.zz", "a-b.example.org", "localhost"],
    "ipv4": ["10.0.0.1", "255.255.255.255", "1.2.3.4"],
    "ipv6": ["fe80::1", "2001:db8::ff00:42:8329"],
    "uri": ["ftp://zz.zz/x", "urn:isbn:0451450523", "http://a.b/c?d#e"],
    "uuid": ["00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-4FFF-8FFF-FFFFFFFFFFFF"],
}


def _conditional(n, kw, v, builder: InstanceBuilder):
    """For `then`: values that satisfy `if` (so `then` applies) and break `then`; for `else` the
    same with `if` failing. The caller keeps only those jsonschema says break `kw` alone."""
    other = n.get("else" if kw == "then" else "then")
    rest = {k: x for k, x in n.items() if k not in ("if", "then", "else")}
    built = [_try(builder, s, variant) for s in (n.get("if"), other, rest) for variant in (0, 1, 2)]
    values = [b for b in built if b is not _NONE]
    if isinstance(v, dict):
        values = [{**v, **b} for b in values if isinstance(b, dict)] + values
    return values + _ANY_VALUES + [0, "x", 1.5]


def _pattern_properties(n, v):
    """Objects with a key that one pattern matches and a value that breaks that pattern's subschema."""
    if not isinstance(v, dict) or not isinstance(n.get("patternProperties"), dict):
        return []
    out = []
    for pattern in n["patternProperties"]:
        key = regex_sample(pattern, 1)
        if key is not None:
            out += [{**v, key: value} for value in _ANY_VALUES + ["x", 0]]
    return out


_NONE = object()


def _try(builder: InstanceBuilder, schema, variant: int = 0):
    try:
        return builder.value(schema, 0, variant)
    except Impossible:
        return _NONE


def candidates(node: dict, kw: str, v, builder: InstanceBuilder) -> list:
    """Values for `node` that may violate `kw` only (checked by the caller)."""
    if kw in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf"):
        return _numbers(node, kw, v)
    if kw in ("minLength", "maxLength", "pattern", "format"):
        return _strings(node, kw, v)
    if kw in ("minItems", "maxItems", "uniqueItems", "items", "contains"):
        return _arrays(node, kw, v, builder)
    if kw in (
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "dependentRequired",
        "propertyNames",
    ):
        return _objects(node, kw, v, builder)
    if kw in ("enum", "const"):
        listed = node["enum"] if kw == "enum" and isinstance(node["enum"], list) else [node.get("const")]
        near = [x + "_x" for x in listed if isinstance(x, str)] + [
            x + 1 for x in listed if isinstance(x, int) and not isinstance(x, bool)
        ]
        return near + _ANY_VALUES
    if kw == "type":
        return [1.5, "x", 0, None, True, [], {}]
    if kw in ("then", "else") and isinstance(node.get("if"), (dict, bool)):
        return _conditional(node, kw, v, builder)
    if kw == "patternProperties":
        return _pattern_properties(node, v)
    if kw == "not":
        return [c for c in (_try(builder, node["not"]),) if c is not _NONE]
    if kw == "oneOf" and isinstance(node["oneOf"], list):
        return [c for c in (_try(builder, b) for b in node["oneOf"]) if c is not _NONE]
    if kw == "anyOf":
        return list(_ANY_VALUES) + [0, "x"]
    return []


def _without(schema, path: tuple):
    out = copy.deepcopy(schema)
    node = out
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return out


def keyword_probes(schema) -> tuple[object, list[Probe]]:
    """(the valid instance, one probe per keyword that could be violated alone).
    Raises Impossible when no valid instance can be built."""
    if schema is True:  # any JSON: no keyword to probe (`true` stopped the probes with a TypeError)
        return None, []
    if not isinstance(schema, dict):
        raise Impossible("the schema `false` holds no instance")
    builder = InstanceBuilder(schema, full=True)
    base = builder.build()
    whole = validator(schema)
    parents = _parents(schema, builder)
    probes = []
    for path, node in iter_subschemas(schema):
        try:
            v = builder.value(node, 0)
        except Impossible:
            continue
        focus = _leading_to(node, parents)
        for kw in list(node):
            probe = _probe(schema, whole, builder, path, node, kw, v, focus)
            if probe is not None:
                probes.append(probe)
    return base, probes


def _parents(schema, builder: InstanceBuilder) -> dict[int, set[int]]:
    """id of every dict or list in `schema` -> the ids of those holding it, or naming it by `$ref`."""
    parents: dict[int, set[int]] = {}
    seen: set[int] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        children = list(node.values()) if isinstance(node, dict) else list(node)
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            try:
                children.append(builder.resolve(node["$ref"], node))
            except Impossible:
                pass
        for child in children:
            if isinstance(child, (dict, list)):
                parents.setdefault(id(child), set()).add(id(node))
                stack.append(child)
    return parents


def _leading_to(node, parents: dict[int, set[int]]) -> set[int]:
    """The ids of `node` and of every part of the schema it can be reached from."""
    found = {id(node)}
    stack = [id(node)]
    while stack:
        for parent in parents.get(stack.pop(), ()):
            if parent not in found:
                found.add(parent)
                stack.append(parent)
    return found


def _probe(
    schema, whole, builder: InstanceBuilder, path: tuple, node: dict, kw: str, v, focus: set[int]
) -> Probe | None:
    """The first candidate value that, swapped in at `node` of an instance holding only the optional
    parts that lead to it (`focus`), breaks `kw` alone."""
    values = candidates(node, kw, v, builder)
    if not values:
        return None
    relaxed = None
    for value in values:
        builder.override = (id(node), lambda _variant, value=value: copy.deepcopy(value))
        builder.focus = focus
        try:
            instance = builder.value(schema, 0)
        except Impossible:
            continue
        finally:
            builder.override = builder.focus = None
        if whole.is_valid(instance):
            continue
        if relaxed is None:
            relaxed = validator(_without(schema, path + (kw,)))
        if relaxed.is_valid(instance):
            return Probe(path + (kw,), kw, instance, value)
    return None
