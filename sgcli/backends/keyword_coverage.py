"""Which JSON Schema keywords a backend's compiled grammar enforces, by keyword and JSON pointer.

Each backend declares what it enforces as data (`Capabilities.schema_keywords`, measured by
benchmarks/keyword_positions.py and the JSON-Schema-Test-Suite). This walks a schema the way
a validator does, from the root through the applicators the backend enforces faithfully
(properties, items, `$ref`, allOf, anyOf ...), resolving references with the `referencing`
library (`$id`-relative refs, anchors, cycles, boolean subschemas; the schema as read:
`schema_doc.SchemaDoc`). Every constraint keyword it meets that the backend is not known to
enforce *there* is a `Gap`; its subschemas are not walked further, because sgcli's schema
checker (`schema_checker.py`) then validates the whole subschema that holds it. Conservative: a
keyword not listed as enforced counts as a gap.

Each gap also says whether the checker can enforce it: the checker is jsonschema, so a remote
`$ref` it cannot resolve, a `format` it has no checker for, or a `pattern` the `regex` package cannot
read (`schema_patterns`; meta-validation refuses most such first) is enforced by nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import unquote

from sgcli.backends.base import SchemaKeywords
from sgcli.backends.json_layout import one_spelling_fits
from sgcli.backends.keyword_readings import INEXACT_NUMBER, NO_NUMBER_BETWEEN, inexact, why_unenforced
from sgcli.backends.outlines_coverage import dropped_keywords
from sgcli.backends.pattern_gaps import declared_pattern_gaps
from sgcli.backends.schema_doc import SchemaDoc, escape_pointer, subschemas
from sgcli.constraints.formats import format_checker, user_format_regex
from sgcli.constraints.jsonpos import pointer_parts
from sgcli.constraints.schema_patterns import regex_error
from sgcli.constraints.spec import Kind
from sgcli.dialects.embedded import EmbeddedSchema, embedded_schemas
from sgcli.errors import UserError

# Applicators whose subschemas apply to the same value or to children of it, unconditionally.
UNCONDITIONAL = frozenset(
    {"properties", "patternProperties", "additionalProperties", "items", "prefixItems", "additionalItems"}
    | {"allOf", "$ref"}
)
_DYNAMIC = ("$dynamicRef", "$recursiveRef")


@dataclass(frozen=True)
class Gap:
    """A keyword the backend's grammar does not enforce where it stands."""

    pointer: str  # JSON pointer of the keyword in the schema, e.g. "/properties/tags/uniqueItems"
    keyword: str
    backend: str
    reason: str  # why the grammar does not, for humans
    checker: bool = True  # sgcli's schema checker enforces it while decoding (else nothing does)
    # pointers of the subschemas the checker validates for it, each reached unconditionally from the root
    anchors: tuple[str, ...] = ("",)
    why_not_checked: str | None = None  # why the checker cannot, where it cannot
    # the schema inside a grammar that holds it (None: the --schema itself); its pointer is into that schema
    embedded: EmbeddedSchema | None = field(default=None, compare=False)

    def record(self) -> dict:
        where = {"within": self.embedded.label} if self.embedded else {}
        return {"pointer": self.pointer, "keyword": self.keyword, "backend": self.backend} | where

    def describe(self) -> str:
        return f"`{self.keyword}` at {self.pointer or '/'}" + (f" in {self.embedded.label}" if self.embedded else "")


def grammar_gaps(schema, backend: str, table: SchemaKeywords | None, doc: SchemaDoc | None = None) -> list[Gap]:
    """Every (pointer, keyword) of `schema` that `backend`'s grammar does not enforce, by its declared table
    (None: it enforces nothing, as for the `none` backend)."""
    doc = doc or SchemaDoc(schema)
    if table is None:
        table = SchemaKeywords(enforced=frozenset(), through=frozenset())
    gaps: dict[str, Gap] = {}
    anchors: dict[str, dict[str, None]] = {}
    seen: set[tuple[str, str]] = set()
    met: dict[int, bool] = {}  # by node: whether its enum/const values meet its other keywords (judged once)

    def values_meet(node: dict) -> bool:
        if id(node) not in met:
            met[id(node)] = _values_meet(doc, node)
        return met[id(node)]

    stack = [(schema, "", "")]  # (subschema, its pointer, the anchor: the nearest unconditional subschema)
    while stack:
        node, pointer, anchor = stack.pop()
        if not isinstance(node, dict) or (pointer, anchor) in seen:
            continue
        seen.add((pointer, anchor))
        keys = doc.constraint_keys(node)
        for key in keys:
            here = f"{pointer}/{escape_pointer(key)}"
            why = why_unenforced(node, key, table, keys, values_meet, lambda ref, at=pointer: _node_at(doc, at, ref))
            if why is None and key in ("$ref", *_DYNAMIC):
                why, target = _ref_gap(doc, pointer, node, key, table)
                if why is None:
                    stack.append((doc.nodes[target], target, target if anchor == pointer else anchor))
                    continue
            if why is not None:
                gaps.setdefault(here, Gap(here, key, backend, why))
                anchors.setdefault(here, {})[anchor] = None
                continue
            if key in table.through:
                unconditional = key in UNCONDITIONAL and anchor == pointer
                for sub, sub_pointer in subschemas(node, key, pointer):
                    stack.append((sub, sub_pointer, sub_pointer if unconditional else anchor))
    found = [replace(g, anchors=tuple(anchors[g.pointer])) for g in gaps.values()]
    return _anchor_gaps(found, doc)


def _values_meet(doc: SchemaDoc, node: dict) -> bool:
    """Whether every value `node`'s `enum` (or its `const`) lists is valid against the rest of `node`, as
    jsonschema reads it: then a backend that compiles the values alone drops nothing. Where that cannot
    be judged, False (the siblings are left to the checker)."""
    values = node["enum"] if "enum" in node else [node["const"]] if "const" in node else []
    rest = {k: v for k, v in node.items() if k not in ("enum", "const")}
    if not isinstance(values, list):
        return False
    try:  # a `$ref` beside the values resolves from the root: as it would through the whole schema
        validator = doc.cls(rest, registry=doc.registry, format_checker=format_checker(doc.cls))
        return all(validator.is_valid(value) for value in values)
    except Exception:  # a `$ref` relative to an inner `$id`, a pattern re cannot read: not judged
        return False


def _ref_gap(doc: SchemaDoc, pointer: str, node: dict, key: str, table: SchemaKeywords) -> tuple[str | None, str]:
    ref = node.get(key)
    if key in _DYNAMIC or not isinstance(ref, str):
        return "a dynamic reference", ""
    target, unresolvable = doc.resolve(pointer, ref)
    if unresolvable is not None:
        return f"cannot be resolved ({unresolvable})", ""
    if target is None:
        return "refers outside this file (no backend fetches it: compiled as any value)", ""
    if not isinstance(doc.nodes.get(target), dict):
        return "refers to a boolean schema", ""
    if table.root_fragments and ref[1:2] in ("", "/") and unquote(ref[1:]) != target:
        return "resolved against the document's root, not the `$id` around it", ""
    return None, target


def _anchor_gaps(gaps: list[Gap], doc: SchemaDoc) -> list[Gap]:
    """Gaps whose check needs the dynamic scope from the root are anchored at the root."""
    if any(g.keyword in _DYNAMIC for g in gaps) or _has_dynamic(doc):
        return [replace(g, anchors=("",)) for g in gaps]
    return gaps


def _has_dynamic(doc: SchemaDoc) -> bool:
    return any(isinstance(n, dict) and any(k in n for k in _DYNAMIC) for n in doc.nodes.values())


# ---- what the checker (jsonschema) can enforce ----


def checker_limits(gaps: list[Gap], doc: SchemaDoc) -> list[Gap]:
    """`gaps` with `checker` set, plus a gap for everything inside the checked subschemas that
    jsonschema cannot check either (a remote `$ref`, an unknown `format`, a `pattern` it cannot read)."""
    out: dict[str, Gap] = {}
    formats = set(format_checker(doc.cls).checkers)
    for gap in gaps:
        why = _uncheckable(doc, gap.pointer, gap.keyword, formats) or _unwritable(doc, gap)
        out.setdefault(gap.pointer, replace(gap, checker=why is None, why_not_checked=why))
        parent = "/".join(gap.pointer.split("/")[:-1])
        node = doc.nodes.get(parent)
        if isinstance(node, dict):
            around = f"it sits inside `{gap.keyword}` at {gap.pointer}, which the grammar leaves to the checker"
            for sub, sub_pointer in subschemas(node, gap.keyword, parent):
                for inner in _inside(doc, sub, sub_pointer, formats):
                    out.setdefault(
                        inner.pointer, replace(inner, backend=gap.backend, anchors=gap.anchors, reason=around)
                    )
    return list(out.values())


def _unwritable(doc: SchemaDoc, gap: Gap) -> str | None:
    """Why the checker cannot take a range in which the grammar writes no number (`_no_number_between`),
    or an `enum`/`const` whose every value is a number the grammar writes rounded: the grammar offers
    only the rounded literal, which the checker refuses, so every generation
    backtracked to its limit and failed (`enum: [12345678901234567890]`, a held-out tour, 2026-12-07)."""
    if gap.reason.startswith(NO_NUMBER_BETWEEN):
        return (
            "the grammar takes no number in the range (only an empty text), so the checker has nothing to accept: "
            "no output could pass"
        )
    if gap.keyword not in ("enum", "const") or not gap.reason.startswith(INEXACT_NUMBER):
        return None
    node = doc.nodes.get("/".join(gap.pointer.split("/")[:-1]))
    values = node.get("enum") if isinstance(node, dict) and gap.keyword == "enum" else [node.get("const")]
    if not isinstance(values, list) or not values or not all(inexact(v) for v in values):
        return None
    return (
        "every value it lists is a number the grammar writes rounded, which the check then refuses: no output "
        "could pass (write the value as a string, or with at most 15 significant digits)"
    )


def _uncheckable(doc: SchemaDoc, pointer: str, keyword: str, formats: set[str]) -> str | None:
    parent_pointer = "/".join(pointer.split("/")[:-1])
    node = doc.nodes.get(parent_pointer)
    if not isinstance(node, dict):
        return None
    value = node.get(keyword)
    if keyword in ("$ref", *_DYNAMIC) and isinstance(value, str):
        _, unresolvable = doc.resolve(parent_pointer, value)
        if unresolvable is not None:
            return "jsonschema cannot resolve it either (sgcli fetches nothing)"
    if keyword == "format" and value not in formats:
        return f"no checker knows format {value!r} (define it: --format {value}=REGEX)"
    if keyword == "pattern" and isinstance(value, str) and (why := regex_error(value)) is not None:
        return _unread_pattern(value, why)
    return None


def _inside(doc: SchemaDoc, schema, pointer: str, formats: set[str]) -> list[Gap]:
    """Gaps the checker leaves inside a subschema it validates whole (followed through local refs)."""
    found, seen, stack = [], set(), [(schema, pointer)]
    while stack:
        node, at = stack.pop()
        if not isinstance(node, dict) or at in seen:
            continue
        seen.add(at)
        for key in doc.constraint_keys(node):
            here = f"{at}/{escape_pointer(key)}"
            why = _uncheckable(doc, here, key, formats)
            if why is not None:
                found.append(Gap(here, key, "", why, checker=False, why_not_checked=why))
            if key in ("$ref",) and isinstance(node[key], str):
                target, _ = doc.resolve(at, node[key])
                if target is not None and isinstance(doc.nodes.get(target), dict):
                    stack.append((doc.nodes[target], target))
            if key == "patternProperties" and isinstance(node[key], dict):
                for p in node[key]:
                    if (why := regex_error(p)) is not None:
                        found.append(
                            Gap(f"{here}/{escape_pointer(p)}", key, "", _unread_pattern(p, why), checker=False)
                        )
            stack += list(subschemas(node, key, at))
    return found


def _unread_pattern(pattern: str, why: str) -> str:
    return f"the checker cannot read the regex {pattern!r}: {why}"


# ---- for a spec, a backend, a compiled grammar ----


# why sgcli's schema checker cannot take a keyword of a schema inside a grammar
EMBEDDED_UNCHECKED = "the schema checker follows only a --schema output, not a schema inside a grammar"


def _node_at(doc: SchemaDoc, pointer: str, ref: str):
    """The subschema of this file that `ref`, written at `pointer`, names (None: another file, or none)."""
    target, _ = doc.resolve(pointer, ref)
    return None if target is None else doc.nodes.get(target)


def _embedded_unchecked(gap: Gap, inner: EmbeddedSchema) -> str:
    """Why the checker cannot take `gap` inside a grammar; for a format `--format NAME=REGEX` defined,
    also that the flag stops there (only the checker reads it) and what does reach: a `pattern`."""
    if gap.keyword != "format":
        return EMBEDDED_UNCHECKED
    node = inner.spec.schema()
    for part in pointer_parts(gap.pointer)[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.get(part, {}) if isinstance(node, dict) else {}
    name = node.get("format") if isinstance(node, dict) else None
    if user_format_regex(name) is None:
        return EMBEDDED_UNCHECKED
    return (
        f"{EMBEDDED_UNCHECKED}, so --format {name}=REGEX does not reach it; there, write REGEX as the "
        "string's `pattern`, which the grammar enforces"
    )


def schema_gaps(spec, backend_name: str) -> list[Gap]:
    """The gaps of `spec` on `backend_name`, before compiling (declared data only): of a JSON Schema,
    or of each schema inside a grammar (`dialects.embedded`), which nothing but the grammar enforces."""
    if spec.kind is not Kind.JSON_SCHEMA:
        return [
            replace(gap, checker=False, why_not_checked=_embedded_unchecked(gap, inner), embedded=inner)
            for inner in embedded_schemas(spec)
            for gap in _unreadable(inner.spec, backend_name) or schema_gaps(inner.spec, backend_name)
        ]
    from sgcli.backends import get_backend

    backend = get_backend(backend_name)
    if not backend.capabilities.enforces:
        return []  # the unconstrained backend enforces nothing by design (outputs are still validated)
    try:
        schema = spec.schema()
    except Exception:  # malformed schemas were rejected before compiling; stay robust
        return []
    try:
        doc = SchemaDoc(schema)
    except Exception as exc:  # a shape referencing's crawl cannot read (draft 3's `extends` object): fail closed
        why = exc.message if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
        reason = "sgcli cannot walk the schema to know what the grammar enforces"
        return [Gap("", "$schema", backend.name, reason, checker=False, why_not_checked=why)]
    table = _as_compiled(backend.capabilities.schema_keywords, spec, schema)
    try:
        gaps = grammar_gaps(schema, backend.name, table, doc)
        if table is not None and table.first_branch:
            gaps += _first_branch_gaps(schema, backend.name, doc, {g.pointer for g in gaps})
        gaps += _pattern_gaps(spec, schema, backend.name, table, doc, {g.pointer for g in gaps})
    except (RecursionError, TypeError, ValueError, KeyError) as exc:  # a schema shape the walk does not know
        # conservative: nothing of it counts as enforced by the grammar; the checker validates it whole
        gaps = [Gap("", "$schema", backend.name, f"sgcli could not walk the schema ({type(exc).__name__}: {exc})")]
    return checker_limits(gaps, doc)


def _as_compiled(table: SchemaKeywords | None, spec, schema) -> SchemaKeywords | None:
    """`table` for the grammar `spec` compiles to: whether its names may be written with escapes the
    grammar reads as raw text depends on how it is compiled (`raw_escaped_names`), "always" where so."""
    if table is None or not table.raw_escaped_names:
        return table
    narrowed = spec.json_options.for_generation and (table.raw_escaped_names == "dry-run" or one_spelling_fits(schema))
    return replace(table, raw_escaped_names="" if narrowed else "always")


def _unreadable(spec, backend_name: str) -> list[Gap]:
    """One gap for a whole schema sgcli cannot read (a --schema is refused before this; one inside a
    grammar reaches the backend as it is): nothing of it counts as enforced."""
    try:
        spec.schema()
    except UserError as exc:
        return [Gap("", "$schema", backend_name, f"sgcli could not read the schema ({exc.message})")]
    return []


def _pattern_gaps(spec, schema, backend: str, table, doc: SchemaDoc, known: set[str]) -> list[Gap]:
    """The `pattern`s its grammar relaxes or leaves out (pattern_gaps.declared_pattern_gaps), each a gap
    the checker takes: declared, so `auto` ranks by them before compiling (they were compile warnings)."""
    out = []
    for gap in declared_pattern_gaps(spec, schema, backend, table):
        warning = gap.warning()
        if warning.pointer not in known:
            known.add(warning.pointer)
            parent = "/".join(warning.pointer.split("/")[:-1])
            out.append(
                Gap(warning.pointer, "pattern", backend, warning.message, anchors=(_nearest_anchor(doc, parent),))
            )
    return out


def _first_branch_gaps(schema, backend: str, doc: SchemaDoc, known: set[str]) -> list[Gap]:
    """outlines-core compiles each subschema by its first recognised keyword and drops the others."""
    out = []
    for pointer, message in dropped_keywords(schema):
        if pointer in known or not pointer:
            continue
        keyword = pointer_parts(pointer)[-1]
        parent = "/".join(pointer.split("/")[:-1])
        out.append(Gap(pointer, keyword, backend, message, anchors=(_nearest_anchor(doc, parent),)))
    return out


def _nearest_anchor(doc: SchemaDoc, pointer: str) -> str:
    """The deepest subschema above `pointer` reached from the root through unconditional applicators only
    (the root when the way there passes a $ref: the walk of `grammar_gaps` is the exact one)."""
    parts = pointer_parts(pointer)
    anchor, node, at = "", doc.schema, ""
    i = 0
    while i < len(parts) and isinstance(node, dict):
        key = parts[i]
        if key not in UNCONDITIONAL or key == "$ref":
            break
        step = 2 if key in ("properties", "patternProperties", "prefixItems", "allOf") else 1
        if key == "items" and isinstance(node.get("items"), list):
            step = 2
        at = at + "".join("/" + escape_pointer(p) for p in parts[i : i + step])
        node = doc.nodes.get(at)
        i += step
        if isinstance(node, dict):
            anchor = at
    return anchor


def compiled_gaps(compiled) -> list[Gap]:
    """The gaps of a compiled JSON Schema: the declared ones, plus every keyword the backend's own
    compile warnings point at."""
    return warned_gaps(compiled.spec, compiled.backend, compiled.warnings)


def warned_gaps(spec, backend: str, warnings: list) -> list[Gap]:
    """The declared gaps of `spec` on `backend`, plus every keyword its `warnings` (a compile's, or those
    of printing the schema as grammar text) point at: what lint, compile and convert all name."""
    gaps = schema_gaps(spec, backend)
    if spec.kind is not Kind.JSON_SCHEMA:
        return gaps  # warnings point into the grammar, not into the schemas inside it
    declared = {g.pointer for g in gaps}
    try:
        doc = SchemaDoc(spec.schema())
    except Exception:
        return gaps
    extra, known = [], set(declared)
    for w in warnings:
        if w.pointer and w.pointer not in known:
            known.add(w.pointer)
            keyword = pointer_parts(w.pointer)[-1]
            parent = "/".join(w.pointer.split("/")[:-1])
            extra.append(Gap(w.pointer, keyword, backend, w.message, anchors=(_nearest_anchor(doc, parent),)))
    # what the checker cannot take inside a warned subschema may be declared already: one gap per keyword
    return gaps + [g for g in checker_limits(extra, doc) if g.pointer not in declared] if extra else gaps


def unchecked(gaps: list[Gap]) -> list[Gap]:
    """The gaps nothing enforces: neither the grammar nor the checker."""
    return [g for g in gaps if not g.checker]


def weakened_keywords(compiled) -> list[dict]:
    """[{pointer, keyword, backend}] for every schema keyword `compiled`'s grammar does not enforce
    (the record's `weakened`): the declared gaps and those its own warnings point at."""
    return [g.record() for g in compiled_gaps(compiled)]


# ---- for a serving engine: its grammar is its own, sgcli checks the answer ----


def unjudged_gaps(spec, engine: str) -> list[Gap]:
    """Every keyword of `spec` (a JSON Schema sent to `engine`) that sgcli's schema checker cannot judge in
    the server's answer: a `format` jsonschema has no checker for, a `pattern` the checker cannot read.
    Whatever the server's grammar does with them, nothing sgcli runs checks them."""
    if spec.kind is not Kind.JSON_SCHEMA:
        return []
    doc = SchemaDoc(spec.schema())
    return [replace(g, backend=engine) for g in _inside(doc, doc.schema, "", set(format_checker(doc.cls).checkers))]
