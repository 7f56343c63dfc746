"""The references of one schema document: what each `$ref` names, which point outside the file,
and reference cycles that never reach a value.

sgcli resolves them itself (base URIs from `$id`, `$anchor`/`$dynamicAnchor`, JSON pointers)
instead of through the `referencing` library, which raises TypeError or AttributeError on shapes
real schemas have (a pointer into a `true` subschema, draft-04 `dependencies` arrays), and
because the checks below need the node each reference lands on. Every walk is iterative.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

from sgcli.constraints.jsonpos import pointer_parts

REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")

# Where subschemas sit, across drafts 4 to 2020-12.
_ONE = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties", "dependencies")
# Applied to the same instance as the schema holding them: a cycle of these never reaches a value.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas", "dependencies")
_LEGACY = ("draft-03", "draft-04", "draft-06", "draft-07")


@dataclass(frozen=True)
class Reference:
    keyword: str  # $ref, $dynamicRef or $recursiveRef
    ref: str  # as written
    path: tuple  # where the keyword sits in the document
    source: dict  # the subschema holding it
    target: object  # the subschema it names; None when it names nothing in this document
    remote: bool  # it names another document (nothing here can resolve it)
    uri: str = ""  # the reference resolved against its base: "other.json#/$defs/a", "http://x/y.json#a"
    base: str = ""  # the base URI where it stands (the root's, or an embedded `$id`'s)
    target_path: tuple | None = None  # where `target` sits in the document (None: remote or nowhere)


def references(schema) -> list[Reference]:
    """Every reference of the document, each resolved against the base URI where it stands."""
    walk = _Walk(schema)
    walk.run()
    return walk.refs


class Document:
    """One schema document's references, and what a fragment (`#/$defs/a`, `#name`) names in it:
    for a reference from another document into this one (`schema_bundle`)."""

    def __init__(self, schema):
        self._walk = _Walk(schema)
        self._walk.run()
        self.refs = self._walk.refs
        root_id = schema.get(self._walk.id_key) if isinstance(schema, dict) else None
        own = _strip_fragment(_join("", root_id)) if isinstance(root_id, str) and not root_id.startswith("#") else ""
        self.base = own if self._walk.resources.get(own) is schema else ""

    def fragment(self, fragment: str) -> tuple[object, tuple | None]:
        """(node, its path) that `#fragment` (as written, percent-encoded) names at the root; path None: nothing."""
        node, _, _, path = self._walk.resolve("#" + fragment, self.base)
        return node, path


def first_cycle(schema, refs: list[Reference]) -> list[Reference] | None:
    """The references of a cycle that applies a schema to the same instance again before any
    property or item is taken (`#/$defs/a` -> `#/$defs/b` -> `#/$defs/a`, `allOf: [{$ref: "#"}]`);
    None without one. The JSON Schema specification leaves such schemas' behaviour undefined:
    validators recurse forever and llguidance compiles them to the empty string."""
    by_source: dict[int, list[Reference]] = {}
    for r in refs:
        if isinstance(r.target, dict):
            by_source.setdefault(id(r.source), []).append(r)
    if not isinstance(schema, dict):
        return None
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    path: list[tuple[dict, Reference | None]] = [(schema, None)]
    stack = [iter(_in_place_edges(schema, by_source))]
    state[id(schema)] = 1
    while stack:
        step = next(stack[-1], None)
        if step is None:
            stack.pop()
            state[id(path.pop()[0])] = 2
            continue
        node, via = step
        seen = state.get(id(node))
        if seen == 1:
            start = next(i for i, (n, _) in enumerate(path) if n is node)
            chain = [r for _, r in path[start + 1 :] if r is not None]
            return chain + ([via] if via is not None else [])
        if seen is None:
            state[id(node)] = 1
            path.append((node, via))
            stack.append(iter(_in_place_edges(node, by_source)))
    return None


def _in_place_edges(node: dict, by_source: dict[int, list[Reference]]):
    """(subschema applied to the same instance, the reference that leads there or None)."""
    for key in _IN_PLACE_ONE:
        if isinstance(node.get(key), dict):
            yield node[key], None
    for key in _IN_PLACE_LIST:
        if isinstance(node.get(key), list):
            yield from ((sub, None) for sub in node[key] if isinstance(sub, dict))
    for key in _IN_PLACE_MAP:
        if isinstance(node.get(key), dict):
            yield from ((sub, None) for sub in node[key].values() if isinstance(sub, dict))
    for r in by_source.get(id(node), ()):
        yield r.target, r


def ref_hides_siblings(schema) -> bool:
    """Up to draft 7 (by the root's `$schema`), `$ref` makes the other keywords of its subschema ignored."""
    dialect = schema.get("$schema", "") if isinstance(schema, dict) else ""
    return isinstance(dialect, str) and any(d in dialect for d in _LEGACY)


def subschemas(node: dict):
    """(key path below `node`, child subschema) for the schema-valued keywords of `node`."""
    for key in _ONE:
        if isinstance(node.get(key), (dict, bool)):
            yield (key,), node[key]
    for key in _LIST:
        if isinstance(node.get(key), list):
            yield from (((key, i), sub) for i, sub in enumerate(node[key]) if isinstance(sub, (dict, bool)))
    for key in _MAP:
        if isinstance(node.get(key), dict):
            yield from (((key, name), sub) for name, sub in node[key].items() if isinstance(sub, (dict, bool)))


class _Walk:
    def __init__(self, schema):
        self.root = schema
        dialect = schema.get("$schema", "") if isinstance(schema, dict) else ""
        self.legacy = ref_hides_siblings(schema)
        self.id_key = "id" if isinstance(dialect, str) and ("draft-03" in dialect or "draft-04" in dialect) else "$id"
        self.resources: dict[str, object] = {}
        self.anchors: dict[tuple[str, str], object] = {}
        self.pending: list[tuple[str, str, dict, str]] = []  # (keyword, ref, source, base)
        self.refs: list[Reference] = []
        self.visited: set[int] = set()
        self.paths = container_paths(schema)

    def run(self) -> None:
        stack = [(self.root, "")]
        while stack or self.pending:
            while stack:
                self.visit(*stack.pop(), stack)
            pending, self.pending = self.pending, []
            for keyword, ref, source, base in pending:
                target, remote, resource_base, target_path = self.resolve(ref, base)
                path = (*self.paths.get(id(source), ()), keyword)
                uri = _join(base, ref)
                self.refs.append(Reference(keyword, ref, path, source, target, remote, uri, base, target_path))
                if isinstance(target, dict) and id(target) not in self.visited:
                    stack.append((target, resource_base))  # named by a pointer outside the keywords walked

    def visit(self, node, base: str, stack: list) -> None:
        if not isinstance(node, dict) or id(node) in self.visited:
            return
        self.visited.add(id(node))
        own_id = node.get(self.id_key)
        if isinstance(own_id, str) and not (self.legacy and "$ref" in node):  # draft <= 7: $ref hides its siblings
            if own_id.startswith("#"):
                self.anchors[(base, unquote(own_id[1:]))] = node  # draft <= 7: "#name" is an anchor
            else:
                base = _strip_fragment(_join(base, own_id))
                self.resources.setdefault(base, node)
        if node is self.root:
            self.resources.setdefault(base, node)
            self.resources.setdefault("", node)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                self.anchors.setdefault((base, node[key]), node)
        legacy_anchor = node.get("id")
        if self.id_key == "$id" and isinstance(legacy_anchor, str) and legacy_anchor.startswith("#"):
            self.anchors.setdefault((base, unquote(legacy_anchor[1:])), node)  # draft-04 style, undeclared
        for keyword in REF_KEYWORDS:
            ref = node.get(keyword)
            if isinstance(ref, str):
                self.pending.append((keyword, ref, node, base))
        stack.extend((sub, base) for _, sub in subschemas(node))

    def resolve(self, ref: str, base: str) -> tuple[object, bool, str, tuple | None]:
        """(target or None, whether it is in another document, the target document's base URI,
        the target's path in this document or None)."""
        uri, _, fragment = _join(base, ref).partition("#")
        resource = self.resources.get(uri)
        if resource is None:
            return None, True, uri, None
        fragment = unquote(fragment)
        path = self.paths.get(id(resource))
        if not fragment:
            return resource, False, uri, path
        if not fragment.startswith("/"):
            node = self.anchors.get((uri, fragment))
            return node, False, uri, None if node is None else self.paths.get(id(node))
        node, path = resource, list(path or ())
        for part in pointer_parts(fragment):
            if isinstance(node, dict) and part in node:
                node = node[part]
                path.append(part)
            elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
                path.append(int(part))
            else:
                return None, False, uri, None
        return node, False, uri, tuple(path)


def container_paths(value) -> dict[int, tuple]:
    """id(object or array) -> its path in the document, walked without recursion."""
    paths: dict[int, tuple] = {}
    stack = [(value, ())]
    while stack:
        node, path = stack.pop()
        paths[id(node)] = path
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        stack.extend((child, (*path, key)) for key, child in items if isinstance(child, (dict, list)))
    return paths


def _join(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return _strip_fragment(base) + ref
    if urlsplit(ref).scheme:
        return ref
    return urljoin(base, ref) if base else ref


def _strip_fragment(uri: str) -> str:
    return uri.partition("#")[0]
