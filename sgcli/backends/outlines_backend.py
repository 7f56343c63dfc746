"""outlines-core adapter: a JSON Schema becomes one regex, the regex one token-level DFA index.

Only regular languages: JSON Schema (through `build_regex_from_schema`), regex and choice.
The index is built over the whole vocabulary up front, so compiling is slow on large
vocabularies and complex schemas; masks are then a table lookup.

outlines-core's `Vocabulary` knows one EOS id and no special tokens: specials are left
out (never allowed), and the Vocab's other stop ids are treated as that EOS.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote

from sgcli.backends.base import BITS_PER_WORD, Capabilities, Compiled, CompileWarning, LibraryBackend, SchemaKeywords
from sgcli.backends.diagnostics import positioned_error, regex_place, schema_error
from sgcli.backends.draft_reading import as_its_draft_reads, tuples_as_prefix_items
from sgcli.backends.json_layout import whitespace_regex
from sgcli.backends.listed_properties import shaped
from sgcli.backends.native_stderr import capture_fd2
from sgcli.backends.outlines_coverage import (
    concatenated_all_of,
    dropped_keywords,
    ungrouped_empty_schema,
    unreadable_reason,
    unreadable_subschema,
)
from sgcli.backends.pattern_gaps import at, declared_pattern_gaps, with_patterns
from sgcli.backends.schema_warnings import find
from sgcli.constraints.jsonpos import locate, pointer_parts
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.grammar_model import Alt, Opaque, ParseError, Seq
from sgcli.dialects.regex_parse import LOOKAROUNDS, parse_regex
from sgcli.errors import UserError
from sgcli.tokenizers.vocab import Vocab

# the `format`s its regexes get exactly right (measured: random walks and edge values, benchmarks/format_edges.py)
_EXACT_FORMATS = frozenset({"uuid"})

if TYPE_CHECKING:
    import numpy as np
    import outlines_core as oc

MAX_ROLLBACK = 1024


class OutlinesMatcher:
    def __init__(self, index, stop_ids: tuple[int, ...]):
        import outlines_core as oc

        self._guide = oc.Guide(index, max_rollback=MAX_ROLLBACK)
        self._stops = stop_ids
        self._stopped = False
        self.error: str | None = None

    def fill_mask(self, bitmask: np.ndarray) -> None:
        if self._stopped or self.error:
            bitmask.fill(0)
            return
        self._guide.write_mask_into(bitmask.ctypes.data, bitmask.size, 4)
        if self._guide.is_finished():  # the single EOS is allowed: so is every stop id
            import numpy as np  # not at module import (`sgcli lint` start-up)

            words = bitmask.view(np.uint32)
            for i in self._stops:
                word, bit = divmod(i, BITS_PER_WORD)
                words[word] |= np.uint32(1 << bit)

    def accept(self, token_id: int) -> bool:
        if self.error:
            return False
        if token_id in self._stops and not self._stopped and self._guide.is_finished():
            self._stopped = True
            return True
        try:
            self._guide.advance(token_id, return_tokens=False)
            return True
        except ValueError:
            self.error = f"token {token_id} is not allowed by the grammar here"
            return False

    def rollback(self, n: int) -> None:
        if n > 0 and self._stopped:
            self._stopped = False
            n -= 1
        if n > 0:
            self._guide.rollback_state(n)

    def jump_forward(self) -> bytes:
        return b""  # outlines-core has no forced-bytes query

    def is_terminated(self) -> bool:
        return self._stopped

    def can_stop(self) -> bool:
        return self._guide.is_finished()


@dataclass(eq=False)
class OutlinesCompiled(Compiled):
    index: oc.Index = field(kw_only=True)

    def matcher(self) -> OutlinesMatcher:
        return OutlinesMatcher(self.index, tuple(self.vocab.stop_ids))

    def serialize(self) -> bytes | None:
        """The regex, then the Index in outlines-core's own binary form (its pickle payload; read back
        with `Index.from_binary`, never unpickled)."""
        regex = (self.normalized or "").encode("utf-8")
        return len(regex).to_bytes(8, "little") + regex + self.index.__reduce__()[1][0]


class OutlinesCoreBackend(LibraryBackend):
    module = "outlines_core"
    distribution = "outlines-core"
    name = "outlines_core"
    description = "outlines-core: JSON Schema -> regex -> token DFA index, built up front (Outlines, SGLang 'outlines')"
    capabilities = Capabilities(
        kinds=frozenset({Kind.JSON_SCHEMA, Kind.REGEX, Kind.CHOICE}),
        json_options=frozenset({"compact", "whitespace_pattern", "max_whitespace", "strict_properties"}),
        notes="regular languages only; objects never take unlisted properties; keywords it drops (minimum, "
        "uniqueItems, ...) are warnings at their JSON pointer; slow to compile on big schemas",
        cacheable=True,
        ships_compiled=True,  # measured: a 735 KB Index serializes and loads in 2 ms, compiled in 32 ms
        # measured: benchmarks/keyword_positions.py; on top of these, every keyword but the first recognised
        # one of each subschema is dropped (outlines_coverage.dropped_keywords)
        schema_keywords=SchemaKeywords(
            enforced=frozenset(
                {"type", "enum", "const", "pattern", "minLength", "maxLength", "format"}
                | {"items", "prefixItems", "minItems", "maxItems"}
                | {"properties", "required", "additionalProperties", "minProperties", "anyOf", "allOf", "$ref"}
            ),
            through=frozenset({"properties", "additionalProperties", "items", "prefixItems", "anyOf", "oneOf"})
            | {"allOf", "$ref"},
            formats=_EXACT_FORMATS,
            typed=frozenset({"pattern", "minLength", "maxLength", "format", "minItems", "maxItems", "minProperties"}),
            lone_all_of=True,
            disjoint_one_of=True,
            escaped_names=False,
            first_branch=True,
            drops_beside_values=frozenset({"enum", "const"}),  # `{"type": "integer", "const": "x"}` took "x"
            escaped_values=False,
            required_listed=True,  # `{"required": ["zz", "y"], "properties": {"y": ...}}` took {"y": -6}
            raw_patterns="any",  # `.` wrote a raw quote
            # its DFA has none of these ("Failed to build DFA"): handed the pattern relaxed, the checker the rest
            unmatchable=LOOKAROUNDS | {"backreference", "word boundary", "non-word-boundary"},
            root_fragments=True,
            wide_shorthands=frozenset("dDwWsS"),  # `\\w` took combining marks, `\\d` U+1E5F5 (2026-12-06)
        ),
    )

    @staticmethod
    def eos_id(vocab: Vocab) -> int:
        if vocab.eos_id is not None and vocab.eos_id in vocab.stop_ids:
            return vocab.eos_id
        if vocab.stop_ids:
            return vocab.stop_ids[0]
        raise UserError(f"outlines_core needs an end-of-sequence token, and {vocab.source} declares none")

    def prepare(self, vocab: Vocab) -> None:
        self.vocabulary(vocab)

    def vocabulary(self, vocab: Vocab):
        """outlines-core's Vocabulary for `vocab`: exact bytes -> ids (several ids may share bytes)."""
        import outlines_core as oc

        def build():
            eos = self.eos_id(vocab)
            by_bytes: dict[bytes, list[int]] = {}
            for i, piece in enumerate(vocab.tokens):
                if piece and i not in vocab.special_ids and i != eos:
                    by_bytes.setdefault(piece, []).append(i)
            return oc.Vocabulary(eos, by_bytes)

        return self.per_vocab(vocab, build)

    def regex(self, spec: ConstraintSpec) -> str:
        """The one regex outlines-core compiles for `spec`."""
        if spec.kind is not Kind.JSON_SCHEMA:
            return without_edge_anchors(spec.as_regex())
        from outlines_core.json_schema import build_regex_from_schema

        schema = as_its_draft_reads(spec.schema(), spec.text)  # outlines-core reads every draft's keywords
        schema = shaped(schema, spec.json_options)
        gaps = declared_pattern_gaps(spec, schema, self.name, self.capabilities.schema_keywords)
        schema = with_patterns(schema, gaps)  # see _warnings
        schema = _grouped_patterns(_exact_formats_only(schema))
        self._refuse_broken(spec, schema)
        try:  # a draft's tuple as `prefixItems`: paths above are the file's
            built = build_regex_from_schema(json.dumps(tuples_as_prefix_items(schema)), _WS_MARK, ref_depth(schema))
        except ValueError as exc:
            raise self._schema_error(spec, str(exc), schema) from None
        except TypeError as exc:  # its JSON reader stops at 128 levels: "Expected a valid JSON string."
            raise self._schema_error(spec, f"{exc} (outlines-core reads JSON nested at most 128 levels)") from None
        return _place_whitespace(built, whitespace_regex(spec.json_options))

    def _refuse_broken(self, spec: ConstraintSpec, schema) -> None:
        """Schemas outlines-core would compile into a regex that no longer describes them."""

        for pointer, why, fix in (
            (
                concatenated_all_of(schema),
                "allOf with several subschemas would be compiled as their concatenation, which is never valid JSON",
                "merge the allOf subschemas into one",
            ),
            (
                ungrouped_empty_schema(schema),
                "the empty schema {} would be compiled as an ungrouped alternation that breaks the structure around it",
                "give that subschema a type",
            ),
        ):
            if pointer is not None:
                line, col = locate(spec.text, pointer_parts(pointer)) or (None, None)
                raise positioned_error(
                    self.name,
                    spec,
                    f"{why} (at {pointer})",
                    line=line,
                    col=col,
                    hint=f"{fix}, or use --backend llguidance or xgrammar",
                )

    def compile(self, spec: ConstraintSpec, vocab: Vocab) -> Compiled:
        import outlines_core as oc

        vocabulary = self.vocabulary(vocab)
        t = time.perf_counter()
        regex = self.regex(spec)
        with capture_fd2():
            try:
                index = oc.Index(regex, vocabulary)
            except ValueError as exc:
                raise self._regex_error(spec, str(exc)) from None
        elapsed = time.perf_counter() - t
        return OutlinesCompiled(self.name, spec, vocab, elapsed, self._warnings(spec), regex, index=index)

    def deserialize(self, data: bytes, spec: ConstraintSpec, vocab: Vocab) -> Compiled | None:
        import outlines_core as oc

        t = time.perf_counter()
        size = int.from_bytes(data[:8], "little")
        try:
            regex = data[8 : 8 + size].decode("utf-8")
            index = oc.Index.from_binary(data[8 + size :])
        except (ValueError, UnicodeDecodeError):  # stale version, truncated file: the cache recompiles
            return None
        elapsed = time.perf_counter() - t
        return OutlinesCompiled(self.name, spec, vocab, elapsed, self._warnings(spec), regex, index=index)

    def _warnings(self, spec: ConstraintSpec) -> list[CompileWarning]:
        """Keywords outlines-core compiles away without enforcing them, each at its pointer."""
        if spec.kind is not Kind.JSON_SCHEMA:
            return []

        schema = spec.schema()
        # a pattern admitting `"`, `\` or a control character is written raw: left out, the checker takes it
        gaps = declared_pattern_gaps(spec, schema, self.name, self.capabilities.schema_keywords)
        escaped = [gap.warning() for gap in gaps]
        return [CompileWarning(message, pointer) for pointer, message in dropped_keywords(schema)] + escaped

    def _schema_error(self, spec: ConstraintSpec, message: str, given=None) -> UserError:
        """outlines-core's words at the place they are about. `given`: the schema it was given, with the
        file's paths (a pattern or format sgcli left out of it changes what it quotes)."""
        first = message.split("\n")[0].strip()
        schema = spec.schema()
        given = schema if given is None else given
        paths, hint = [], None
        m = re.match(r"Format (\S+) is not supported", first)
        if m:
            paths = find(schema, lambda n: "format" if n.get("format") == m.group(1) else None)
        m = re.match(r"Invalid reference path: (.*)$", first)
        if m:  # it follows a pointer through object keys only
            paths = find(schema, lambda n: "$ref" if _ref_steps_through(n.get("$ref"), m.group(1)) else None)
            hint = "outlines-core follows a $ref through object keys only: refer to a subschema under $defs/definitions"
        m = re.match(r"Unsupported JSON Schema structure (.*)$", first)
        if m:
            quoted, found = m.group(1), unreadable_subschema(given)
            clip = _FRAGMENT_CHARS if found is None else _FRAGMENT_CHARS // 2  # a pointer says where the rest is
            if len(quoted) > clip:  # outlines-core quotes the whole subschema: a root's is the file
                first = f"Unsupported JSON Schema structure {quoted[:clip]}... ({len(quoted):,} chars)"
            if found is not None:
                paths = [found[0]]
                why, hint = unreadable_reason(given, *found)
            else:
                why = "outlines-core reads a subschema only as an object with one of type, properties, allOf, anyOf, "
                why += "oneOf, prefixItems, enum, const or $ref (no `true`/`false`, no `patternProperties`)"
                hint = "find that subschema in the file and give it a `type`, or use --backend llguidance or xgrammar"
            first += f": {why}"
        return schema_error(self.name, spec, first, paths, hint=hint)

    def _regex_error(self, spec: ConstraintSpec, message: str) -> UserError:
        """outlines-core says little ("error building NFA"); Python's `re` often says where."""
        why = None
        if spec.kind is Kind.REGEX:
            try:
                re.compile(spec.text)
            except re.error as exc:
                why = exc
        if why is not None and why.pos is not None:
            line, col = regex_place(spec.text, why.pos)
            return positioned_error(self.name, spec, f"{message} ({why.msg})", line=line, col=col)
        if spec.kind is Kind.JSON_SCHEMA:
            return schema_error(
                self.name,
                spec,
                message,
                [],
                hint="a pattern in the schema may use a feature outlines-core's DFA lacks "
                "(lookaround, backreferences, \\b); try --backend llguidance or xgrammar",
            )
        return positioned_error(
            self.name, spec, message, hint="outlines-core builds a DFA: no lookaround, backreferences or \\b"
        )


_FRAGMENT_CHARS = 160  # of a subschema quoted in an error


def _ref_steps_through(ref, step: str) -> bool:
    return isinstance(ref, str) and ref.startswith("#") and step in pointer_parts(unquote(ref[1:]))


OUTLINES_REF_DEPTH = 3  # outlines-core's own `max_recursion_depth`: past it a `$ref` is written as `{}` alone
_MAX_REF_DEPTH = 32


def ref_depth(schema) -> int:
    """The `max_recursion_depth` that lets outlines-core follow every `$ref` of an acyclic schema: the longest
    chain of references into `$defs`/`definitions`. Its default, 3, wrote five nested pydantic models'
    innermost ones as `{}` only (no valid instance could be generated; found by a tour). A schema whose
    references form a cycle, or name anything but a whole definition, keeps the default: deeper, a
    recursive schema's regex grows exponentially."""
    from sgcli.constraints.schema_refs import references

    def owner(path) -> tuple:  # the definition a path lies in, or the root
        return tuple(path[:2]) if len(path) >= 2 and path[0] in ("$defs", "definitions") else ()

    edges: dict[tuple, set[tuple]] = {(): set()}
    for ref in references(schema):
        target = ref.target_path
        if target is None or len(target) != 2 or owner(target) != tuple(target):
            return OUTLINES_REF_DEPTH
        edges.setdefault(owner(ref.path), set()).add(tuple(target))
        edges.setdefault(tuple(target), set())
    depth: dict[tuple, int] = {}
    for start in edges:  # longest path by depth-first search; a node met on the stack is a cycle
        stack, on_stack = [(start, iter(edges[start]))], {start}
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                on_stack.discard(node)
                depth[node] = (1 if node else 0) + max((depth[c] for c in edges[node]), default=0)
            elif child in on_stack:
                return OUTLINES_REF_DEPTH
            elif child not in depth:
                stack.append((child, iter(edges[child])))
                on_stack.add(child)
    return min(max(OUTLINES_REF_DEPTH, depth[()]), _MAX_REF_DEPTH)


# A marker outlines-core places wherever JSON whitespace may go (no schema text contains \x01).
_WS_MARK = "\x01ws\x01"


def _exact_formats_only(schema):
    """`schema` without the `format`s outlines-core only approximates, which the checker then enforces
    on an ordinary JSON string: its `email` and `uri` regexes wrote raw quotes and control characters
    (43 and 46 of 150 random walks were not JSON), `date` took Unicode digits and `2023-02-30`, `time`
    no offset; and those it does not know (`ipv4`) no longer refuse the schema."""
    from sgcli.backends.schema_warnings import iter_subschemas

    inexact = [path for path, node in iter_subschemas(schema) if node.get("format", "uuid") not in _EXACT_FORMATS]
    if not inexact:
        return schema
    schema = copy.deepcopy(schema)
    for path in inexact:
        at(schema, path).pop("format")
    return schema


def _grouped_patterns(schema):
    """`schema` with each `pattern` as one group without its edge anchors, which outlines-core puts between
    quotes as it is: `^cat|dog$` became `"cat|dog"`, which is `"cat` or `dog"` (not JSON), and `^a\\$`
    became `"a\\"` (its `$` cut as an anchor). A whole-value match of the group is what it enforces then:
    no wider than the pattern, which jsonschema searches for."""
    from sgcli.backends.schema_warnings import iter_subschemas

    found = [(path, node["pattern"]) for path, node in iter_subschemas(schema) if isinstance(node.get("pattern"), str)]
    if not found:
        return schema
    schema = copy.deepcopy(schema)
    for path, pattern in found:
        at(schema, path)["pattern"] = f"(?:{without_edge_anchors(pattern)})"
    return schema


def _place_whitespace(regex: str, ws: str) -> str:
    """outlines-core allows whitespace after an array's comma but not before it (`(,WS(`), unlike
    objects (`WS,WS`) and the other backends; add the missing slot, then put the pattern in."""
    return regex.replace(f"(,{_WS_MARK}(", f"({_WS_MARK},{_WS_MARK}(").replace(_WS_MARK, ws)


def without_edge_anchors(pattern: str) -> str:
    """`pattern` without the `^` that starts and the `$` that ends each top-level alternative: a whole-text
    regex means them anyway, and outlines-core refuses them ("anchored universal start state doesn't
    exist"): 219 of 239 JSON Schema Store patterns it refused as `--regex` compiled without them."""
    if "^" not in pattern and "$" not in pattern:
        return pattern
    try:
        node = parse_regex(pattern).node
    except ParseError:
        return pattern  # outlines-core says what is wrong

    def anchor(n, which: str) -> bool:
        return isinstance(n, Opaque) and n.what == f"anchor {which}"

    cut: set[int] = set()
    for alt in node.alts if isinstance(node, Alt) else [node]:
        items = alt.items if isinstance(alt, Seq) else [alt]
        for which, run in (("^", items), ("$", items[::-1])):
            for item in run:
                if not anchor(item, which):
                    break
                cut.add(item.pos)
    return "".join(ch for i, ch in enumerate(pattern) if i not in cut)
