"""A schema as its own draft reads it, for a grammar library that reads every draft's keywords at once.

jsonschema validates a schema under the draft it names: a draft-7 schema's `prefixItems` is an unknown
keyword there (its `items` applies to every element), a 2020-12 schema's `additionalItems` means
nothing, and up to draft 7 a `$ref` overrides its siblings. The libraries read a keyword wherever they
meet it: xgrammar and outlines-core applied a draft-7 `prefixItems` and wrote `[1]` where `items` asks
for strings; llguidance, given `additionalItems` beside `prefixItems`, dropped `prefixItems`; and a
draft-7 `$ref` beside `type` was refused as unsatisfiable. So each library gets the schema without the
keywords its draft ignores, and reads it as jsonschema does. The keyword coverage (`SchemaDoc`) reads
only the draft's keywords too, so what it declares enforced is what the library was given. A tuple of
drafts 3 to 2019-09 (a list `items`) is respelled for the libraries that read only 2020-12's
(`tuples_as_prefix_items`).
"""

from __future__ import annotations

import copy
import re
from functools import cache
from urllib.parse import unquote

from sgcli.backends.pattern_gaps import at
from sgcli.backends.schema_doc import COMPANIONS
from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.constraints.jsonpos import pointer_of, resolve_ref

# Keywords a draft reads inside another keyword's validator (not in its VALIDATORS table): draft 3/4's
# boolean `exclusiveMaximum` belongs to `maximum`; draft 3's `required: true` to `properties`.
_READ_BY_ANOTHER = {
    "Draft3Validator": frozenset({"exclusiveMaximum", "exclusiveMinimum", "required"}),
    "Draft4Validator": frozenset({"exclusiveMaximum", "exclusiveMinimum"}),
}
# Companions read only from these drafts on (`then`/`else` wherever `if` is; `additionalItems` where
# it is a keyword of the draft).
_COMPANION_FROM = {"minContains": ("Draft201909Validator", "Draft202012Validator")}
_COMPANION_FROM["maxContains"] = _COMPANION_FROM["minContains"]


@cache
def _every_draft_keyword() -> frozenset[str]:
    import jsonschema

    drafts = (jsonschema.Draft3Validator, jsonschema.Draft4Validator, jsonschema.Draft6Validator)
    drafts += (jsonschema.Draft7Validator, jsonschema.Draft201909Validator, jsonschema.Draft202012Validator)
    return frozenset().union(*(d.VALIDATORS for d in drafts)) | frozenset(COMPANIONS)


@cache
def _draft(cls) -> tuple[frozenset[str], bool, re.Pattern]:
    """(the keywords `cls`'s draft reads, whether a `$ref` overrides its siblings there, a search for
    any keyword name the draft may ignore): once per draft, as a compile can be 50 us."""
    known = frozenset(cls.VALIDATORS) | _READ_BY_ANOTHER.get(cls.__name__, frozenset())
    ref_overrides = cls.__name__ in ("Draft3Validator", "Draft4Validator", "Draft6Validator", "Draft7Validator")
    suspects = (_every_draft_keyword() - known) | frozenset(COMPANIONS) | ({"$ref"} if ref_overrides else set())
    return known, ref_overrides, re.compile('"(?:' + "|".join(sorted(map(re.escape, suspects))) + ')"')


def as_its_draft_reads(schema, text: str | None = None):
    """`schema`, or a copy without the keywords its draft ignores: those of other drafts, a companion
    (`then`, `additionalItems`, `minContains`, ...) without its keyword, and up to draft 7 every
    sibling of a `$ref` that validates. Annotations, `$defs`/`definitions` and unknown keys stay.
    `text`, the schema's JSON where the caller has it, spares the walk when no such keyword is named."""
    if not isinstance(schema, dict):
        return schema
    from sgcli.constraints.dialect import dialect_of

    cls = dialect_of(schema).cls
    known, ref_overrides, suspects = _draft(cls)
    beside_ref = {"required"} if cls.__name__ == "Draft3Validator" else set()
    every = _every_draft_keyword()
    if text is not None and "\\u" not in text and not suspects.search(text):  # a key may be spelled `\u0065`
        return schema

    def read(key: str, node: dict) -> bool:
        owner = COMPANIONS.get(key)
        if owner is None:
            return key in known
        if owner not in node or owner not in known:
            return False
        drafts = _COMPANION_FROM.get(key)
        return cls.__name__ in drafts if drafts else key in known or owner == "if"

    def ignored(node: dict) -> list[str]:
        if ref_overrides and "$ref" in node:  # draft 3's `required: true` is its parent's `properties`'
            return [k for k in node if k in every and k != "$ref" and k not in beside_ref]
        return [k for k in node if k in every and not read(k, node)]

    if not any(ignored(node) for _, node in iter_subschemas(schema)):
        return schema
    targets = _ref_segments(schema)
    schema = copy.deepcopy(schema)
    for _, node in list(iter_subschemas(schema)):
        for key in ignored(node):
            if key not in targets and not _holds_an_identifier(node[key]):
                node.pop(key)
    return schema


_LIST_ITEMS = re.compile(r'"items"\s*:\s*\[')


def reads_tuples_from_items(schema) -> bool:
    """Whether `schema`'s draft spells a tuple as a list `items` (drafts 3 to 2019-09), not `prefixItems`."""
    from sgcli.constraints.dialect import dialect_of

    return isinstance(schema, dict) and "prefixItems" not in dialect_of(schema).cls.VALIDATORS


def tuples_as_prefix_items(schema, text: str | None = None):
    """`schema` (as its draft reads it), or a copy with each tuple of drafts 3 to 2019-09 spelled as 2020-12
    does: the list `items` as `prefixItems`, its `additionalItems` as `items`. xgrammar refused a list
    `items` ("items must be a boolean or an object", commitlint's and cspell's schemas) and outlines-core
    cannot read one; llguidance reads both spellings. A local `$ref` into a tuple is respelled with it.
    A node that also holds `prefixItems` (kept as a reference's target) is left as written."""
    if not reads_tuples_from_items(schema) or (text is not None and "\\u" not in text and not _LIST_ITEMS.search(text)):
        return schema
    tuples = [path for path, node in iter_subschemas(schema) if _a_tuple(node)]
    if not tuples:
        return schema
    schema = copy.deepcopy(schema)
    refs = [(node, _respelled(schema, node["$ref"], tuples)) for node in _walk(schema) if "$ref" in node]
    for path in reversed(tuples):  # the deepest first: a path still reads as written above it
        node = at(schema, path)
        node["prefixItems"] = node.pop("items")
        if "additionalItems" in node:
            node["items"] = node.pop("additionalItems")
    for node, ref in refs:
        if ref is not None:
            node["$ref"] = ref
    return schema


def _a_tuple(node: dict) -> bool:
    return isinstance(node.get("items"), list) and "prefixItems" not in node


def _respelled(schema, ref, tuples: list[tuple]) -> str | None:
    """`ref` as it reads once `tuples` are respelled, where it points into one of them (else None)."""
    found = resolve_ref(schema, ref) if isinstance(ref, str) else None
    if found is None:
        return None
    written, starts = found[1], set(tuples)
    path = [
        ("prefixItems" if step == "items" else "items")
        if written[:i] in starts and step in ("items", "additionalItems")
        else step
        for i, step in enumerate(written)
    ]
    return None if tuple(path) == written else "#" + pointer_of(path)


_IDENTIFIERS = frozenset({"$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor"})


def _walk(value):
    stack = [value]
    while stack:  # iterative: the schema was parsed with a bounded depth
        value = stack.pop()
        if isinstance(value, dict):
            yield value
            stack += value.values()
        elif isinstance(value, list):
            stack += value


def _ref_segments(schema) -> set[str]:
    """Every segment of every reference's JSON pointer: a keyword named there may be a reference's
    target (`"$ref": "#/then"` in a draft that ignores a lone `then`), so it stays, whatever it means."""
    segments: set[str] = set()
    for node in _walk(schema):
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            ref = node.get(key)
            if isinstance(ref, str) and "#" in ref:
                segments.update(
                    unquote(part).replace("~1", "/").replace("~0", "~") for part in ref.split("#", 1)[1].split("/")
                )
    return segments


def _holds_an_identifier(value) -> bool:
    """Whether `value` embeds a resource or an anchor that a reference may name."""
    return any(_IDENTIFIERS & node.keys() for node in _walk(value))
