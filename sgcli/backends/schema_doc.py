"""One JSON Schema as sgcli's schema tools walk it: its draft, a `referencing` resolver, its subschemas
by pointer, and the subschemas each applicator holds. Shared by the keyword coverage
(`keyword_coverage`) and the decode-time checker's plan (`schema_plan`).
"""

from __future__ import annotations

from functools import cache
from urllib.parse import quote

from sgcli.errors import UserError

# Keywords that take part in another keyword's constraint (jsonschema validates them under it).
COMPANIONS = {
    "then": "if",
    "else": "if",
    "minContains": "contains",
    "maxContains": "contains",
    "additionalItems": "items",
}
_ONE = ("additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems", "contains")
_ONE += ("propertyNames", "not", "if", "then", "else", "contentSchema")
_MAP = ("properties", "patternProperties", "dependentSchemas", "dependencies")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")


class SchemaDoc:
    """A schema with its validator class (its draft), a `referencing` resolver and an index of its
    subschemas by identity, so a resolved reference maps back to a pointer in this file."""

    def __init__(self, schema):
        import referencing
        import referencing.jsonschema as rj

        from sgcli.constraints.dialect import dialect_of

        self.schema = schema
        dialect = dialect_of(schema)
        self.cls = dialect.cls
        self.spec = rj.specification_with(dialect.uri, default=rj.DRAFT202012)
        try:
            resource = self.spec.create_resource(schema)
            base = resource.id() or ""
            # crawled once: an uncrawled registry crawls the whole schema again at every lookup (AsyncAPI
            # 3.0, 400 KB with 100 embedded `$id`s: 10,000 lookups took 57 s; sgcli compile took 71 s). The
            # drafts' meta-schemas then keep their URIs, as jsonschema's validators find them: a copy a
            # schema embeds under its draft-04 `id` (AsyncAPI 2.0.0-rc1) would otherwise take them over.
            own = referencing.Registry().with_resource(base, resource).crawl()
        except (AttributeError, TypeError, ValueError, KeyError, RecursionError) as exc:
            # a shape `referencing` cannot walk (draft 3's `extends` given one schema): nothing that walks
            # the schema (the checker, the keyword coverage, jsonschema itself) could read it
            raise UserError(
                f"sgcli cannot read the schema's structure: `referencing` fails on it ({type(exc).__name__}: {exc})",
                hint="check the keywords of its draft; draft 3's `extends` and `disallow` are read by few tools",
            ) from None
        self.registry = own.combine(_crawled_specifications())  # the later registry wins a URI both hold
        self.resolver = self.registry.resolver(base_uri=base)
        self.keywords = frozenset(self.cls.VALIDATORS) | frozenset(COMPANIONS)
        self.ref_overrides = self.cls.__name__ in (
            "Draft3Validator",
            "Draft4Validator",
            "Draft6Validator",
            "Draft7Validator",
        )
        self.by_id: dict[int, str] = {}
        self.nodes: dict[str, object] = {}
        self._index(schema, "")
        self._resolvers: dict[str, object] = {}

    def _index(self, value, pointer: str) -> None:
        stack = [(value, pointer)]
        while stack:
            value, pointer = stack.pop()
            if isinstance(value, dict):
                self.by_id.setdefault(id(value), pointer)
                self.nodes[pointer] = value
                stack += [(v, f"{pointer}/{escape_pointer(k)}") for k, v in value.items()]
            elif isinstance(value, list):
                self.nodes[pointer] = value
                stack += [(v, f"{pointer}/{i}") for i, v in enumerate(value)]
            elif isinstance(value, bool):
                self.nodes[pointer] = value

    def resolver_at(self, pointer: str):
        """The resolver whose base URI applies inside the subschema at `pointer` (embedded `$id`s)."""
        found = self._resolvers.get(pointer)
        if found is None:
            found = self.resolver if not pointer else self.resolver.lookup("#" + fragment(pointer)).resolver
            self._resolvers[pointer] = found
        return found

    def resolve(self, pointer: str, ref: str) -> tuple[str | None, str | None]:
        """(pointer of the local subschema `ref` names, from the subschema at `pointer`; None where it is
        outside this file), (why it cannot be resolved at all, or None)."""
        try:
            resolved = self.resolver_at(pointer).lookup(ref)
        except Exception as exc:  # referencing.exceptions.Unresolvable and its kin
            return None, f"{type(exc).__name__}: {exc}"
        contents = resolved.contents
        if isinstance(contents, bool):
            return None, None
        return self.by_id.get(id(contents)), None

    def constraint_keys(self, node: dict) -> list[str]:
        """The keywords of `node` that constrain an instance in this draft (annotations and unknown keys do not)."""
        keys = [k for k in node if k in self.keywords and (k not in COMPANIONS or COMPANIONS[k] in node)]
        if self.ref_overrides and "$ref" in node:  # up to draft 7, $ref's siblings are ignored
            return ["$ref"]
        return keys


@cache
def _crawled_specifications():
    """The drafts' meta-schemas as jsonschema finds them, crawled once a process (1.3 ms a schema)."""
    import jsonschema_specifications

    return jsonschema_specifications.REGISTRY.crawl()


def lists_optional_properties(node: dict) -> bool:
    """Whether some property that `properties` lists is not `required` (llguidance then counts only
    the others for min/maxProperties: `SchemaKeywords.counts_all_required`)."""
    listed = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    required = node.get("required") if isinstance(node.get("required"), list) else []
    return bool(set(listed) - set(required))


def fragment(pointer: str) -> str:
    """A JSON pointer as a URI fragment (what `$ref` takes)."""
    return quote(pointer, safe="/~!$&'()*+,;=:@")


def escape_pointer(key) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def subschemas(node: dict, keyword: str, pointer: str):
    """(subschema, pointer) for each subschema the keyword's value holds."""
    value = node.get(keyword)
    here = f"{pointer}/{escape_pointer(keyword)}"
    if keyword == "items" and isinstance(value, list):
        yield from ((v, f"{here}/{i}") for i, v in enumerate(value))
    elif keyword in _ONE or keyword == "items":
        if isinstance(value, (dict, bool)):
            yield value, here
    elif keyword in _MAP and isinstance(value, dict):
        yield from ((v, f"{here}/{escape_pointer(k)}") for k, v in value.items() if isinstance(v, (dict, bool)))
    elif keyword in _LIST and isinstance(value, list):
        yield from ((v, f"{here}/{i}") for i, v in enumerate(value))
