"""A JSON Schema's own checks before anything compiles: valid under its draft's meta-schema, every
`$ref` resolved (files beside it bundled: `schema_bundle`), no reference cycle that never reaches a
value. Each failure is an exit 2 at the keyword's file:line:col.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sgcli.constraints.jsonpos import locate, pointer_of
from sgcli.constraints.reading import read_text
from sgcli.constraints.regex_dialects import DialectError
from sgcli.constraints.schema_patterns import meta_format_checker
from sgcli.constraints.schema_refs import Reference, first_cycle, references
from sgcli.constraints.spec import ConstraintSpec, json_depth
from sgcli.errors import Location, UserError
from sgcli.limits import deep_call


def check_schema(spec: ConstraintSpec) -> ConstraintSpec:
    """Meta-validate a JSON Schema (the error names the offending keyword's position) and its
    references; the spec to use from here on: bundled where its `$ref`s name other files."""
    schema = spec.schema()
    meta_validate(spec, schema)
    return check_refs(spec, schema)


def meta_validate(
    spec: ConstraintSpec, schema, cls: type | None = None, where: Callable[[tuple], Location] | None = None
) -> None:
    """The schema (`spec`'s parsed text) is valid under its draft's meta-schema (or `cls`'s: a file
    bundled into a schema of that draft), or exit 2 at the first invalid keyword in the file, saying how
    many more there are. `where`: the place of a path in the schema, for a schema inside another file (a
    structural tag's content, a Lark `%json`)."""
    import jsonschema

    from sgcli.constraints.dialect import dialect_of

    def at(path) -> Location:
        return (
            where(tuple(path))
            if where is not None
            else Location(spec.origin, *(locate(spec.text, path) or (None, None)))
        )

    if not isinstance(schema, (dict, bool)):
        raise UserError(
            f"a JSON Schema must be an object or a boolean, not {type(schema).__name__}",
            location=at(()) if where is not None else Location(spec.origin, 1, 1),
        )
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if dialect is not None and not isinstance(dialect, str):
        raise UserError(
            f"invalid JSON Schema at /$schema: {json.dumps(dialect)[:60]} is not a string",
            location=at(("$schema",)),
            hint='name the draft by its URI, e.g. "https://json-schema.org/draft/2020-12/schema"',
        )
    cls = cls or dialect_of(schema).cls  # a near miss of a draft's URI: that draft; no draft at all: 2020-12
    # check_schema's own walk, every error kept: it raises whichever comes first in an order that changes
    # from run to run, so a schema with many mistakes was refused at a different place each time
    meta = jsonschema.validators.validator_for(cls.META_SCHEMA, default=cls)
    validator = meta(cls.META_SCHEMA, format_checker=meta_format_checker(cls))  # a `pattern` read as sgcli does
    try:  # jsonschema recurses ~10 frames per schema level; parse_json has bounded the levels
        errors = deep_call(lambda: list(validator.iter_errors(schema)), frames=12 * json_depth(schema))
    except RecursionError:  # the regex package reads a `pattern` (format "regex") a few frames per nested group
        path, depth = _deepest_pattern(schema)
        raise UserError(
            f"a pattern nests {depth} groups deep, more than the regex package (which sgcli's checks use) can read",
            location=at(path),
            hint="flatten the groups (no backend reads more than a few hundred levels either)",
        ) from None
    if errors:
        first = min(errors, key=lambda e: (_document_order(schema, e.path), e.message))
        more = len({(tuple(e.path), e.message) for e in errors}) - 1
        error = jsonschema.exceptions.best_match([first])  # into anyOf's branches, where one says more
        raise UserError(  # a JSON pointer, as every message names a place in a schema (it read "properties/a/type")
            f"invalid JSON Schema at {pointer_of(error.absolute_path) or '/'}: {_message(error)}"
            + (f" (and {more} more)" if more else ""),
            location=at(error.absolute_path),
            hint=f"the schema must be valid under {cls.__name__.removesuffix('Validator')}",
        )


_TYPES = ("array", "boolean", "integer", "null", "number", "object", "string")


def _message(error) -> str:
    """What `error` says, in words for a schema's author where jsonschema's are the meta-schema's."""
    if isinstance(error.cause, DialectError):
        return f"sgcli cannot read the regex {error.instance!r} (JSON Schema's syntax is ECMA-262's): {error.cause}"
    for e in (error, *error.context):  # `type`'s anyOf (a name, or a list of names) keeps its enum check below
        names = e.validator_value if e.validator == "enum" else None
        if isinstance(names, list) and set(_TYPES) <= set(map(str, names)) and not isinstance(e.instance, list):
            return f"{e.instance!r} is not a JSON Schema type ({', '.join(_TYPES)})"
    return error.message


def _document_order(schema, path) -> tuple[int, ...]:
    """Where `path` lies in the schema's text, as a sort key: at each step the key's place among its
    object's keys (json keeps the file's order) or the array index."""
    order, node = [], schema
    for part in path:
        if isinstance(node, dict) and part in node:
            order.append(list(node).index(part))
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            order.append(part)
        else:
            break
        node = node[part]
    return tuple(order)


def _deepest_pattern(schema) -> tuple[tuple, int]:
    """(path, nesting) of the regex in `schema` (a `pattern` or a `patternProperties` name) whose groups
    nest deepest, counted on its unescaped parentheses."""
    best: tuple[tuple, int] = ((), 0)
    stack: list[tuple[object, tuple]] = [(schema, ())]
    while stack:  # iterative: parse_json bounded the levels, nothing here recurses
        node, path = stack.pop()
        if isinstance(node, list):
            stack += [(v, path + (i,)) for i, v in enumerate(node)]
            continue
        if not isinstance(node, dict):
            continue
        regexes = [(("pattern",), node["pattern"])] if isinstance(node.get("pattern"), str) else []
        if isinstance(node.get("patternProperties"), dict):
            regexes += [(("patternProperties", k), k) for k in node["patternProperties"]]
        for at, regex in regexes:
            depth = _nesting(regex)
            if depth > best[1]:
                best = (path + at, depth)
        stack += [(v, path + (k,)) for k, v in node.items()]
    return best


def _nesting(regex: str) -> int:
    depth = deepest = 0
    escaped = False
    for ch in regex:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth = max(depth - 1, 0)
    return deepest


def check_refs(spec: ConstraintSpec, schema) -> ConstraintSpec:
    """Every `$ref` resolves, or exit 2 at its line:col before anything compiles: one that names another
    file is bundled (`schema_bundle`: a file beside the schema, a draft's meta-schema; sgcli fetches
    nothing), a local one must name something, and no reference cycle may apply a schema to itself
    before reaching a value (schema_refs.first_cycle). Returns the spec to use (bundled or as given)."""
    refs = references(schema)
    if any(ref.remote for ref in refs):
        from sgcli.constraints.schema_bundle import bundle

        spec = bundle(spec, schema, refs, _SchemaFiles())
        schema = spec.schema()
        refs = references(schema)

    def at(ref: Reference) -> Location:
        return spec.place(ref.path)

    for ref in refs:
        if ref.remote:
            raise UserError(
                f"{ref.keyword} {ref.ref!r} points outside this file; sgcli does not fetch schemas, so no "
                "backend could enforce it and no check could judge the output",
                location=at(ref),
                hint="copy the schema it names into $defs and refer to it as '#/$defs/NAME'",
            )
        if ref.target is None:
            raise UserError(
                f"{ref.keyword} {ref.ref!r} does not resolve inside the schema",
                location=at(ref),
                hint="check the JSON pointer or anchor after '#'",
            )
    cycle = first_cycle(schema, refs)
    if cycle:
        chain = " -> ".join(repr(r.ref) for r in [*cycle, cycle[0]])
        raise UserError(
            f"$ref cycle {chain} applies a schema to itself before reaching any value: validation never ends "
            "(the JSON Schema specification leaves such schemas undefined)",
            location=at(cycle[0]),
            hint="let the recursion pass through a property or an array item, or drop the reference",
        )
    return spec


class _SchemaFiles:
    """The files a schema's `$ref`s name, read as `--schema FILE` is (`schema_bundle.Reader`)."""

    def read(self, path: str) -> tuple[str, str]:
        return read_text(path, what="JSON Schema file")

    def meta_validate(self, spec: ConstraintSpec, schema, cls: type) -> None:
        meta_validate(spec, schema, cls)
