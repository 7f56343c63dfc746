"""Building instances of a JSON Schema: a valid one to start from, and per-node values.

The J001 check needs, for each keyword, an instance that breaks only that keyword. It
starts from a valid instance built here, with every listed property present (so every
keyword has a value to act on); L001 uses the minimal one (required properties only).
Every instance is checked with the `jsonschema` library: this module only proposes.
"""

from __future__ import annotations

import copy
import math

from sgcli.constraints.formats import format_checker
from sgcli.constraints.jsonpos import resolve_ref

_FORMATS = {
    "date-time": "2024-01-02T03:04:05Z",
    "date": "2024-01-02",
    "time": "03:04:05Z",
    "duration": "P1D",
    "email": "a@example.com",
    "idn-email": "a@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.168.0.1",
    "ipv6": "::1",
    "uri": "https://example.com",
    "uri-reference": "https://example.com",
    "iri": "https://example.com",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "regex": "a",
    "json-pointer": "/a",
}
# shorter forms, for a `format` beside a small `maxLength` (real schemas: an email of at most 10 characters)
_SHORT_FORMATS = {"email": "a@b.co", "idn-email": "a@b.co", "hostname": "a.co", "idn-hostname": "a.co"}
_SHORT_FORMATS |= {"uri": "a:b", "iri": "a:b", "uri-reference": "a"}
# where a longer one stays of its format: the text goes in front (email, host names) or at the end (URIs)
_GROWS = {"email": 0, "idn-email": 0, "hostname": 0, "idn-hostname": 0, "uri": 1, "iri": 1, "uri-reference": 1}


def _format_sample(fmt: str, lo: int, hi: int | None) -> str:
    """A string of `fmt` with a length in [lo, hi] where one is easy to make (else the usual sample)."""
    for s in (_SHORT_FORMATS.get(fmt), _FORMATS[fmt]):
        if s is not None and len(s) >= lo and (hi is None or len(s) <= hi):
            return s
    s = _SHORT_FORMATS.get(fmt) or _FORMATS[fmt]
    if fmt in _GROWS and len(s) < lo:  # lengthened where the format allows it (a host label stays under 64)
        pad = "a" * min(lo - len(s), 60)
        return pad + s if _GROWS[fmt] == 0 else s + pad
    return _FORMATS[fmt]


_TYPE_KEYWORDS = [
    (
        "object",
        (
            "properties",
            "required",
            "additionalProperties",
            "minProperties",
            "maxProperties",
            "patternProperties",
            "propertyNames",
            "dependentRequired",
        ),
    ),
    ("array", ("items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains")),
    ("string", ("minLength", "maxLength", "pattern", "format")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")),
]
_MAX_DEPTH = 12
# Subschemas one top-level build may visit. Why: with `full`, every optional property is built, and a
# schema whose properties refer back to it (a meta-schema: 30 properties, most of them `{"$ref": "#"}`)
# grows as 30^depth; recursion is built minimally (below), and this bounds what is left.
MAX_BUILD_STEPS = 20_000


MAX_BUILT = 1 << 16  # the largest minLength/minItems/minProperties an instance is built for


def count(schema, key: str, default: int = 0) -> int:
    """A length/size keyword as an int (JSON allows 2.0 for 2); `default` when absent or odd. A minimum
    past MAX_BUILT is Impossible: `minLength: 1e30` asked for a string of 10**30 characters (the probes
    stopped with an OverflowError); a maximum that large bounds nothing and is `default`."""
    v = schema.get(key, default) if isinstance(schema, dict) else default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        return default
    if v > MAX_BUILT:
        if key.startswith("min"):
            raise Impossible(f"`{key}` of {v:g} asks for more than sgcli builds an instance of ({MAX_BUILT:,})")
        return default
    return int(v) if v == int(v) else default


def _is_name_map(pointer: str) -> bool:
    """Whether the object at `pointer` maps names to subschemas (`properties`, `$defs`, ...): its keys
    are names, so a property called `id` there is no base URI."""
    parts = pointer.rsplit("/", 1)
    return len(parts) == 2 and parts[1] in (
        "properties",
        "patternProperties",
        "$defs",
        "definitions",
        "dependentSchemas",
    )


class Impossible(Exception):
    """No instance could be built for this (sub)schema."""


def validator(schema):
    """A validator for `schema` that also checks `format` (where jsonschema can)."""
    from sgcli.constraints.dialect import dialect_of

    cls = dialect_of(schema).cls
    return cls(schema, format_checker=format_checker(cls))


class InstanceBuilder:
    """Proposes instances of `root`. `full`: include optional properties and one array item."""

    def __init__(self, root, *, full: bool):
        self.root = root
        self.full = full
        # (subschema id, keyword) -> a replacement value builder, used by the violation probes
        self.override: tuple[int, object] | None = None
        # while probing: the ids of the subschemas that lead to the overridden one; optional parts
        # outside it are left out (a Pod's full instance took 32 ms a probe to build and validate)
        self.focus: set[int] | None = None
        self._whole = validator(root)
        self._refs: list[int] = []  # the $ref targets being built, outermost first
        self._recursing = 0  # > 0 inside a $ref to a target already being built: required parts only
        self._steps = 0
        self._schema_doc = None  # built on the first reference a plain pointer does not name
        self._has_embedded_ids: bool | None = None

    @property
    def _full(self) -> bool:
        return self.full and not self._recursing

    def _wanted(self, schema) -> bool:
        """Whether an optional part of this schema goes into a full instance."""
        return self._full and (self.focus is None or id(schema) in self.focus)

    def local(self, schema):
        """A validator for a subschema of the root whose references resolve against the root
        (`#/properties/x` inside an `if`/`then` names the root's property, not the subschema's)."""
        return self._whole if schema is self.root else self._whole.evolve(schema=schema)

    def build(self):
        value = self.value(self.root, 0)
        if not self._whole.is_valid(value):
            raise Impossible("the instance built does not validate")
        return value

    def resolve(self, ref: str, at=None):
        """The subschema `ref` names, read from `at` (the subschema holding it): a plain pointer into the
        root at once, else through `referencing` with the base URIs of embedded `$id`s (an `$anchor`, a
        `$ref: "user"` beside `$id: "user"` were "remote" refs here, so lint checked no keyword of them)."""
        if ref.startswith("#") and not self._embedded_ids():
            found = resolve_ref(self.root, ref)
            if found is not None:
                return found[0]
        doc = self._doc()
        target, why = doc.resolve(doc.by_id.get(id(at), ""), ref)
        if target is None:
            raise Impossible(f"unresolvable $ref {ref}" if why is None else f"remote or unresolvable $ref {ref}")
        return doc.nodes[target]

    def _embedded_ids(self) -> bool:
        """Whether a subschema below the root sets its own base URI (`$id`; `id` up to draft 4), found
        once: a property named `id` is no base URI."""
        if self._has_embedded_ids is None:
            doc = self._doc()
            keys = ("$id", "id") if doc.cls.__name__ in ("Draft3Validator", "Draft4Validator") else ("$id",)
            self._has_embedded_ids = any(
                p and isinstance(n, dict) and any(isinstance(n.get(k), str) for k in keys) and not _is_name_map(p)
                for p, n in doc.nodes.items()
            )
        return self._has_embedded_ids

    def _doc(self):
        if self._schema_doc is None:
            from sgcli.backends.schema_doc import SchemaDoc
            from sgcli.errors import UserError

            try:
                self._schema_doc = SchemaDoc(self.root)
            except UserError as exc:
                raise Impossible(exc.message) from None
        return self._schema_doc

    def value(self, schema, depth: int, variant: int = 0):
        if depth == 0:
            self._steps = 0
        self._steps += 1
        if self._steps > MAX_BUILD_STEPS:
            raise Impossible(f"schema too large to build an instance of (over {MAX_BUILD_STEPS} subschemas)")
        if depth > _MAX_DEPTH:
            raise Impossible("schema too deep or recursive")
        if self.override is not None and schema is not None and id(schema) == self.override[0]:
            return self.override[1](variant)
        if schema is True or schema == {}:
            return None
        if schema is False or not isinstance(schema, dict):
            raise Impossible("false schema")
        if "$ref" in schema:
            target = self.resolve(schema["$ref"], schema)
            rest = {k: v for k, v in schema.items() if k not in ("$ref", "$defs", "definitions")}
            recursive = id(target) in self._refs or target is self.root
            self._refs.append(id(target))
            self._recursing += recursive
            try:
                return (
                    self.value(target, depth + 1, variant)
                    if not rest
                    else self.value(_merge(target, rest), depth + 1, variant)
                )
            finally:
                self._refs.pop()
                self._recursing -= recursive
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if "enum" in schema and schema["enum"]:
            return copy.deepcopy(schema["enum"][variant % len(schema["enum"])])
        if "allOf" in schema:
            if self.override is not None and any(id(sub) == self.override[0] for sub in schema["allOf"]):
                return self.override[1](variant)  # a probe of a keyword inside one allOf branch
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for sub in schema["allOf"]:
                merged = _merge(
                    merged, self.resolve(sub["$ref"], sub) if isinstance(sub, dict) and "$ref" in sub else sub
                )
            return self.value(merged, depth + 1, variant)
        if "if" in schema:
            return self.conditional(schema, depth, variant)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.first_valid(schema, key, depth, variant)
        return self.typed(schema, depth, variant)

    def first_valid(self, schema, key: str, depth: int, variant: int):
        rest = {k: v for k, v in schema.items() if k != key}
        branches = list(schema[key])
        if self.override is not None:  # a probe inside a later branch: build that branch
            branches.sort(key=lambda b: not _holds(b, self.override[0]))
        for branch in branches:
            try:
                candidate = self.value(_merge(rest, branch) if rest else branch, depth + 1, variant)
            except Impossible:
                continue
            if self.override is not None or self.local(schema).is_valid(candidate):
                return candidate
        raise Impossible(f"no {key} branch could be built")

    def conditional(self, schema, depth: int, variant: int):
        """if/then/else: an instance of (rest + if + then), else of (rest + else), whichever validates."""
        rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
        cond = schema["if"] if isinstance(schema["if"], dict) else {}
        for branch in (_merge(_merge(rest, cond), schema.get("then", True)), _merge(rest, schema.get("else", True))):
            try:
                candidate = self.value(branch, depth + 1, variant)
            except Impossible:
                continue
            if self.local(schema).is_valid(candidate):
                return candidate
        raise Impossible("no if/then/else branch could be built")

    def typed(self, schema, depth: int, variant: int):
        types = schema.get("type")
        if isinstance(types, str):
            types = [types]
        if not types:
            types = [t for t, keys in _TYPE_KEYWORDS if any(k in schema for k in keys)] or ["null"]
        for t in types:
            try:
                return self.of_type(t, schema, depth, variant)
            except Impossible:
                continue
        raise Impossible("no type could be built")

    def of_type(self, t: str, schema, depth: int, variant: int):
        if t == "null":
            return None
        if t == "boolean":
            return variant % 2 == 0
        if t in ("integer", "number"):
            return number(schema, t == "integer", variant)
        if t == "string":
            return string(schema, variant)
        if t == "array":
            return self.array(schema, depth, variant)
        if t == "object":
            return self.object(schema, depth, variant)
        raise Impossible(f"unknown type {t}")

    def array(self, schema, depth: int, variant: int):
        prefix = schema.get("prefixItems") or []
        items = schema.get("items", True)
        out = [self.value(s, depth + 1, variant) for s in prefix]
        want = count(schema, "minItems")
        if self._wanted(items) and items is not False and count(schema, "maxItems", 1) >= 1:
            want = max(want, len(prefix) + 1)
        unique = schema.get("uniqueItems") is True
        i = 0
        while len(out) < want:
            if items is False:
                raise Impossible("minItems beyond prefixItems with items: false")
            out.append(self.value(items, depth + 1, variant + i if unique else variant))
            i += 1
        if "contains" in schema and not any(self.local(schema["contains"]).is_valid(x) for x in out):
            out.append(self.value(schema["contains"], depth + 1, variant))
        return out

    def object(self, schema, depth: int, variant: int):
        props = schema.get("properties") or {}
        required = list(schema.get("required") or [])
        out = {}
        for name, sub in props.items():
            if name in required or self._wanted(sub):
                out[name] = self.value(sub, depth + 1, variant)
        for name in required:
            if name not in out:
                out[name] = self.value(schema.get("additionalProperties", True), depth + 1, variant)
        for name, deps in (schema.get("dependentRequired") or {}).items():
            if name in out:
                for dep in deps:
                    out.setdefault(dep, self.value(props.get(dep, True), depth + 1, variant))
        extra = 0
        while len(out) < count(schema, "minProperties"):
            extra_schema = schema.get("additionalProperties", True)
            if extra_schema is False:
                raise Impossible("minProperties needs properties the schema does not allow")
            out[f"extra{extra}"] = self.value(extra_schema, depth + 1, variant)
            extra += 1
        return out


def _num(schema, key):
    v = schema.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def number(schema, integer: bool, variant: int = 0):
    """The smallest value within the bounds (a multiple of multipleOf where given), plus
    `variant` steps, so that distinct variants give distinct values."""
    lo, xlo, hi, xhi, step = (
        _num(schema, k) for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf")
    )
    lows = [v for v in (lo, None if xlo is None else xlo + 1) if v is not None]
    value = max(lows) if lows else 0
    if integer:
        value = math.ceil(value)
    if step:
        value = math.ceil(value / step) * step
    value += variant * (step or 1)
    highs_ok = (hi is None or value <= hi) and (xhi is None or value < xhi)
    if not highs_ok and not integer and not step:  # e.g. exclusiveMinimum 0, maximum 0.5
        bottom = max(v for v in (lo, xlo) if v is not None) if (lo is not None or xlo is not None) else 0
        top = min(v for v in (hi, xhi) if v is not None)
        value = (bottom + top) / 2
        highs_ok = True
    if not highs_ok:
        raise Impossible("no number between the bounds")
    if integer or (isinstance(value, float) and value.is_integer() and not isinstance(step, float)):
        value = int(value)
    return value


def string(schema, variant: int = 0) -> str:
    lo = count(schema, "minLength")
    hi = count(schema, "maxLength", -1)
    hi = None if hi < 0 else hi
    if "pattern" in schema:
        from sgcli.dialects.shortest import regex_sample

        s = regex_sample(schema["pattern"], lo, variant)
        if s is None:
            raise Impossible("cannot build a string for the pattern")
    elif schema.get("format") in _FORMATS:
        s = _format_sample(schema["format"], lo, hi)
    else:
        letters = "abcdefghijklmnopqrstuvwxyz"
        s = letters[variant % 26] * max(lo, 1 if variant else lo)
    if len(s) < lo and "pattern" not in schema:
        s += "a" * (lo - len(s))
    if hi is not None and len(s) > hi:
        raise Impossible("string longer than maxLength")
    return s


def _merge(a, b):
    """Shallow merge of two subschemas for allOf: properties and required combine, numeric
    bounds take the stricter value, other keys keep the first."""
    if b is True or b == {}:
        return a
    if not isinstance(a, dict) or not isinstance(b, dict):
        raise Impossible("cannot merge non-object schemas")
    out = dict(a)
    for k, v in b.items():
        if k == "properties" and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        elif k == "required" and k in out:
            out[k] = list(dict.fromkeys(list(out[k]) + list(v)))
        elif k in ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties") and k in out:
            out[k] = max(out[k], v)
        elif k in ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties") and k in out:
            out[k] = min(out[k], v)
        else:
            out.setdefault(k, v)
    return out


def _holds(schema, target: int, depth: int = 0) -> bool:
    """Whether the object with id `target` is `schema` or nested inside it."""
    if id(schema) == target:
        return True
    if depth > _MAX_DEPTH:
        return False
    children = schema.values() if isinstance(schema, dict) else schema if isinstance(schema, list) else ()
    return any(_holds(c, target, depth + 1) for c in children)
