"""A JSON Schema that admits no value at all, found before anything compiles or any request goes out.

A local backend refuses most such schemas when it compiles them, each in its own words and without
a position; a serving engine (`--engine`) does its own constrained decoding and sgcli only validates
the answer, so the request went out and every answer came back invalid (exit 1). `empty_reason`
finds the plain cases in pure Python, so both are one exit 2 at the keyword's file:line:col.

It follows only what must hold for the instance itself: the root, `allOf` members, local `$ref`
targets and, where an object is the only type allowed, the schema of each required property. What
applies conditionally (anyOf, oneOf, not, if/then/else, a property that may be absent, items of an
array that may be empty) is never judged: a branch that admits nothing leaves the others. It is
conservative: None means "not shown empty", never "satisfiable". The walk is iterative and visits
each subschema once.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from sgcli.constraints.jsonpos import pointer_of
from sgcli.constraints.schema_refs import container_paths, ref_hides_siblings, references
from sgcli.constraints.spec import ConstraintSpec
from sgcli.errors import UserError

_BOUNDED = ("string", "number", "integer", "array", "object")  # the types a bound can leave empty
# The lengths a string of a checked `format` can have, read off jsonschema's checkers (sgcli validates formats
# with them): a date is `\d{4}-\d{2}-\d{2}`, a uuid has dashes at 8, 13, 18 and 23, a date-time is RFC 3339's
# `YYYY-MM-DDTHH:MM:SSZ` at least, an IPv4 address 1.2.3.4 to 255.255.255.255. A date under `maxLength: 5` (a
# real schema's) admits nothing: the model loaded, backtracked 64 tokens and failed, exit 1.
_FORMAT_LENGTHS = {"date": (10, 10), "uuid": (36, 36), "date-time": (20, None), "ipv4": (7, 15)}


class Empty(NamedTuple):
    """Why a schema admits no value: the keyword, where it is, and in words."""

    path: tuple  # keys and list indexes down to the keyword (() for the root `false`)
    keyword: str
    reason: str


def empty_reason(schema) -> Empty | None:
    """The first keyword (in document order) that leaves `schema` no value, or None where none is found:
    one that admits nothing where it stands, or a chain of what must hold that comes back to where it
    began (`{"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}`: every value
    must hold another inside it, without end, so no finite value fits)."""
    if schema is False:
        return Empty((), "false", "it is `false`")
    if not isinstance(schema, dict):
        return None
    dialect = schema.get("$schema", "")
    if isinstance(dialect, str) and "draft-03" in dialect:
        return None  # required, type and extends work otherwise there; not worth a second set of rules
    walk = _Walk(schema, const=not (isinstance(dialect, str) and "draft-04" in dialect))
    return walk.run() or walk.endless()


class _Walk:
    def __init__(self, schema: dict, *, const: bool):
        self.root = schema
        self.const = const  # draft 4 has no `const`: there it is an unknown keyword, ignored
        self.formats = _checked_formats(schema)  # those sgcli's validation checks under the schema's draft
        self.ref_only = ref_hides_siblings(schema)
        self._refs: dict[int, list] | None = None  # id(subschema holding a $ref) -> its references
        self._paths: dict[int, tuple] | None = None

    def refs_of(self, node: dict) -> list:
        """The `$ref`s of `node`, resolved (the document's references are found at the first one met)."""
        if "$ref" not in node:
            return []
        if self._refs is None:
            self._refs = {}
            for ref in references(self.root):
                if ref.keyword == "$ref":  # a dynamic reference's target depends on the way there: not followed
                    self._refs.setdefault(id(ref.source), []).append(ref)
        return self._refs.get(id(node), [])

    def path_of(self, node) -> tuple:
        if self._paths is None:
            self._paths = container_paths(self.root)
        return self._paths.get(id(node), ())

    def run(self) -> Empty | None:
        seen: set[int] = set()
        stack: list[tuple[object, tuple, str]] = [(self.root, (), "")]  # (subschema, its path, why it applies)
        while stack:
            node, path, via = stack.pop()
            if node is False:
                return Empty(path, _keyword_of(path), _with(f"the subschema at {pointer_of(path)} is `false`", via))
            if not isinstance(node, dict) or id(node) in seen:
                continue
            seen.add(id(node))
            found, below = self.visit(node, path, via)
            if found is not None:
                return found._replace(reason=_with(found.reason, via))
            stack.extend(reversed(below))  # the first in the document is judged first
        return None

    def endless(self) -> Empty | None:
        """A cycle among the subschemas that must hold (after `run` found none empty): each step inward
        is a required property's value or a subschema of the same value, so a cycle that passes a
        required property asks for a value nested in itself without end (one that does not, `$ref`
        to itself alone, check_refs refuses first). Iterative depth-first search, each subschema once."""
        state: dict[int, int] = {id(self.root): 1}  # 1: on the current path, 2: done
        frames = [(self.root, (), iter(self.visit(self.root, (), "")[1]))]
        while frames:
            node, path, children = frames[-1]
            child = next(children, None)
            if child is None:
                state[id(node)] = 2
                frames.pop()
                continue
            sub, at, via = child
            if not isinstance(sub, dict) or state.get(id(sub)) == 2:
                continue
            if state.get(id(sub)) == 1:
                where = (*path, "$ref") if "$ref" in node else at
                back = pointer_of(self.path_of(sub)) or "the root"
                return Empty(
                    where,
                    _keyword_of(where),
                    f"what must hold here leads back to {back} through a required property ({via}): every "
                    "value would have to hold another inside it without end, so no finite value fits",
                )
            state[id(sub)] = 1
            frames.append((sub, at, iter(self.visit(sub, at, via)[1])))
        return None

    def visit(self, node: dict, path: tuple, via: str) -> tuple[Empty | None, list[tuple[object, tuple, str]]]:
        """(why `node` itself admits nothing, or None; the subschemas that must hold too)."""
        below = []
        for ref in self.refs_of(node):
            if ref.target is False:
                return Empty(ref.path, "$ref", f"`$ref` {ref.ref!r} names the schema `false`"), []
            if isinstance(ref.target, dict):
                below.append((ref.target, self.path_of(ref.target), _within(f"named by `$ref` {ref.ref!r}", via)))
        if self.ref_only and "$ref" in node:  # up to draft 7 the keywords beside $ref are ignored
            return None, below
        found = _own(node, path, const=self.const, formats=self.formats)
        if found is not None:
            return found, []
        members = node.get("allOf")
        if isinstance(members, list):
            below[:0] = [(m, (*path, "allOf", i), via) for i, m in enumerate(members)]
        if _types(node) == {"object"}:
            found, required = _required(node, path)
            if found is not None:
                return found, []
            below += [(sub, at, _within(why, via)) for sub, at, why in required]
        return None, below


def _checked_formats(schema) -> frozenset[str]:
    from sgcli.constraints.dialect import dialect_of
    from sgcli.constraints.formats import format_checker

    return frozenset(format_checker(dialect_of(schema).cls).checkers)


def _own(node: dict, path: tuple, *, const: bool, formats: frozenset[str]) -> Empty | None:
    """What `node`'s own keywords leave empty, without looking at any subschema."""
    enum = node.get("enum")
    if isinstance(enum, list) and not enum:
        return Empty((*path, "enum"), "enum", "`enum` lists no value")
    if const and "const" in node and isinstance(enum, list) and not any(_same(node["const"], v) for v in enum):
        return Empty((*path, "const"), "const", "`const` is not one of the `enum` values")
    if node.get("type") == []:
        return Empty((*path, "type"), "type", "`type` lists no type")
    not_ = node.get("not")
    if not_ is True or not_ == {}:
        return Empty((*path, "not"), "not", "`not` of a schema every value matches")
    types = _types(node)
    if types is None or not types <= set(_BOUNDED):
        return None  # null, boolean (or any type) always fit the bounds
    reasons = []
    for t in [t for t in _BOUNDED if t in types and not (t == "integer" and "number" in types)]:
        why = _bounds(node, t) or (_format_length(node, formats) if t == "string" else None)
        if why is None:
            return None
        reasons.append(why)
    keyword, _ = reasons[0]
    return Empty((*path, keyword), keyword, "; ".join(text for _, text in reasons))


def _types(node: dict) -> set[str] | None:
    """The types `type` allows (None: any)."""
    t = node.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list) and all(isinstance(x, str) for x in t):
        return set(t)
    return None


def _bounds(node: dict, kind: str) -> tuple[str, str] | None:
    """(the keyword, why) where `node`'s bounds leave no value of type `kind`; None where some fits."""
    if kind == "string":
        return _pair(node, "minLength", "maxLength", "no string fits")
    if kind == "array":
        return _pair(node, "minItems", "maxItems", "no array fits")
    if kind == "object":
        found = _pair(node, "minProperties", "maxProperties", "no object fits")
        required = node.get("required")
        most = node.get("maxProperties")
        if found is None and isinstance(required, list) and _num(most):
            names = {r for r in required if isinstance(r, str)}
            if len(names) > most:
                found = ("maxProperties", f"`maxProperties` {most} is less than the {len(names)} required properties")
        return found
    return _numbers(node, integer=kind == "integer")


def _format_length(node: dict, formats: frozenset[str]) -> tuple[str, str] | None:
    """(the length keyword, why) where `format` fixes lengths that `minLength`/`maxLength` rule out."""
    fmt = node.get("format")
    if fmt not in _FORMAT_LENGTHS or fmt not in formats:
        return None
    shortest, longest = _FORMAT_LENGTHS[fmt]
    most, least = node.get("maxLength"), node.get("minLength")
    if _num(most) and most < shortest:
        return "maxLength", f"`maxLength` {most} is shorter than any {fmt} ({shortest} characters at least)"
    if longest is not None and _num(least) and least > longest:
        return "minLength", f"`minLength` {least} is longer than any {fmt} ({longest} characters at most)"
    return None


def _pair(node: dict, low: str, high: str, what: str) -> tuple[str, str] | None:
    lo, hi = node.get(low), node.get(high)
    if _num(lo) and _num(hi) and lo > hi:
        return low, f"`{low}` {lo} is greater than `{high}` {hi}: {what}"
    return None


def _numbers(node: dict, *, integer: bool) -> tuple[str, str] | None:
    low, lo, lo_open = _bound(node, "minimum", "exclusiveMinimum", max)
    high, hi, hi_open = _bound(node, "maximum", "exclusiveMaximum", min)
    if lo is None or hi is None:
        return None
    if integer:
        first = math.floor(lo) + 1 if lo_open else math.ceil(lo)
        last = math.ceil(hi) - 1 if hi_open else math.floor(hi)
        empty, what = first > last, "no integer fits"
    else:
        empty, what = lo > hi or (lo == hi and (lo_open or hi_open)), "no number fits"
    if not empty:
        return None
    return low, f"`{low}` {lo} and `{high}` {hi} leave nothing between them: {what}"


def _bound(node: dict, inclusive: str, exclusive: str, tighter) -> tuple[str, float | None, bool]:
    """(the keyword, the value, whether it is exclusive) of the tighter of a node's two bounds on one side;
    draft 4's boolean `exclusiveMinimum`/`exclusiveMaximum` make `minimum`/`maximum` exclusive."""
    value, keyword, is_open = None, inclusive, False
    if _num(node.get(inclusive)):
        value, is_open = node[inclusive], node.get(exclusive) is True
    other = node.get(exclusive)
    if _num(other) and (value is None or tighter(other, value) != value or other == value):
        value, keyword, is_open = other, exclusive, True
    return keyword, value, is_open


def _required(node: dict, path: tuple) -> tuple[Empty | None, list[tuple[object, tuple, str]]]:
    """Where an object is the only type: (a required property nothing may hold, or None; the schemas
    each required property's value must match)."""
    required = node.get("required")
    if not isinstance(required, list):
        return None, []
    props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    patterns = node.get("patternProperties")
    extra = node.get("additionalProperties", True)
    below = []
    for name in dict.fromkeys(r for r in required if isinstance(r, str)):
        why = f"the required property {name!r}"
        if name in props:
            below.append((props[name], (*path, "properties", name), why))
        elif patterns:
            continue  # whether a pattern names it is a regex question: not judged
        elif extra is False:
            at = (*path, "required", required.index(name))
            return Empty(at, "required", f"{why} is not in `properties` and `additionalProperties` is false"), []
        elif isinstance(extra, dict):
            below.append((extra, (*path, "additionalProperties"), f"{why}, through `additionalProperties`"))
    return None, below


def _num(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same(a, b) -> bool:
    """Python's equality errs only towards "equal" for JSON values (True == 1): never a false "not among"."""
    try:
        return a == b
    except RecursionError:
        return True


def _keyword_of(path: tuple) -> str:
    """The keyword holding the subschema at `path`: `allOf` for /allOf/0, `properties` for /properties/a."""
    if len(path) >= 2 and (isinstance(path[-1], int) or path[-2] in ("properties", "$defs", "definitions")):
        return str(path[-2])
    return str(path[-1]) if path else "false"


def _with(reason: str, via: str) -> str:
    return f"{reason} ({via})" if via else reason


def _within(step: str, via: str) -> str:
    """How a subschema applies, one step further than `via`."""
    return f"{step}, within {via}" if via else step


def check_admits_a_value(spec: ConstraintSpec) -> None:
    """Exit 2 at the keyword's file:line:col where the JSON Schema `spec` admits no value at all, before
    anything compiles or a request goes out: every output would be invalid."""
    found = empty_reason(spec.schema())
    if found is None:
        return
    raise UserError(
        f"the JSON Schema admits no value: {found.reason}; every generation would fail",
        location=spec.place_key(pointer_of(found.path)),
        hint="change that keyword so that some value fits (a subschema that admits nothing is only of use as one "
        "branch of anyOf or oneOf)",
    )
