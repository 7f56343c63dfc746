"""The JSON Schemas inside a grammar: a Lark grammar's `@name` sub-schemas (`--sub`) and inline
`%json {...}`, a structural tag's `json_schema` contents.

Why they are found here: each is compiled by the backend's own JSON Schema support, where sgcli's
schema checker does not follow (it follows a `--schema` output from its first character), so a
keyword the backend leaves unenforced in one is enforced by nothing while decoding
(`backends/keyword_coverage.py` names it, `generate` refuses it). Positions are given in the file
the user wrote: the sub-schema's own file, or the grammar or tag file around the schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

from sgcli.constraints.jsonpos import SchemaText, pointer_of
from sgcli.constraints.spec import ConstraintSpec, Kind, parse_json
from sgcli.dialects.grammar_model import Opaque, ParseError, walk
from sgcli.dialects.lark import parse_lark
from sgcli.errors import ConstraintError, Location, UserError, offset_to_line_col

_INLINE = re.compile(r"%json\s*")


@dataclass(frozen=True)
class EmbeddedSchema:
    """One schema inside a grammar, and where its keywords sit in the user's file."""

    label: str  # how the user wrote it: "@answer", "%json #1", "/structures/0/schema"
    spec: ConstraintSpec  # the schema alone (kind JSON_SCHEMA)
    text: str  # the text of the file positions refer to (`spec.origin`)
    start: int = 0  # where the schema's JSON starts in `text` (an inline %json)
    prefix: str = ""  # the schema's JSON pointer inside `text` (a structural tag's content)

    @cached_property
    def _stext(self) -> SchemaText:
        """The JSON text pointers resolve in: the whole tag file (with `prefix`), else the schema's own."""
        return SchemaText(self.text if self.prefix else self.spec.text)

    def key_span(self, pointer: str) -> tuple[int, int] | None:
        """Character span in `text` of the key naming the value at `pointer` (of the schema)."""
        span = self._stext.key_span(self._stext.path_of(self.prefix + pointer))
        return None if span is None else (span[0] + self.start, span[1] + self.start)

    def location(self, pointer: str) -> Location:
        span = self.key_span(pointer)
        line, col = offset_to_line_col(self.text, span[0]) if span else (None, None)
        if self.text is self.spec.text:  # a sub-grammar file: bundled, its parts are in their own files
            return self.spec.where(line, col)
        return Location(self.spec.origin, line, col)


def check_embedded(spec: ConstraintSpec, *, subs_taken: bool = True) -> None:
    """Each schema written inside a grammar or tag is valid JSON Schema, or exit 2 at the keyword in the
    user's file: the backends said `Invalid type: strin` at the tag file or the `%json` (2026-12-07). A
    `--sub` schema file was checked when it was read."""
    from sgcli.constraints.schema_input import meta_validate

    if spec.kind is Kind.LARK:
        if subs_taken:  # (a command without --sub says what it cannot do with @name)
            _refuse_missing_subs(spec)
        # llguidance placed a `%json` syntax error in the JSON alone ("line 3 column 42"), xgrammar at the `%json`
        for n, start in enumerate(_inline_starts(spec.text)):
            try:
                json.JSONDecoder().raw_decode(spec.text, start)
            except json.JSONDecodeError as exc:  # its position is the file's: the decode started there
                line, col = offset_to_line_col(spec.text, exc.pos)
                raise ConstraintError(
                    f"%json #{n + 1}: not JSON: {exc.msg}",
                    location=Location(spec.origin or spec.name, line, col),
                    hint="a %json schema is one JSON object: no trailing commas, keys in double quotes",
                ) from None
            except RecursionError:
                continue  # nested past Python's stack: the compile's own depth limit says so
    for inner in embedded_schemas(spec):
        if inner.text is inner.spec.text:
            continue
        try:
            meta_validate(inner.spec, inner.spec.schema(), where=lambda path, e=inner: e.location(pointer_of(path)))
        except UserError as exc:
            raise ConstraintError(f"{inner.label}: {exc.message}", location=exc.location, hint=exc.hint) from None


def embedded_schemas(spec: ConstraintSpec) -> list[EmbeddedSchema]:
    """Every JSON Schema inside `spec` (a Lark grammar with its sub-grammars, or a structural tag), in
    file order; [] for other kinds and for text that does not parse (its compile says why)."""
    if spec.kind is Kind.LARK:
        return _in_lark(spec)
    if spec.kind is Kind.STRUCTURAL_TAG:
        return _in_tag(spec)
    return []


@lru_cache(maxsize=16)  # auto ranks three backends, then the guarantee and lint ask again
def _in_lark(spec: ConstraintSpec, within: str = "") -> list[EmbeddedSchema]:
    found = []
    for name, sub in spec.subgrammars:
        if sub.kind is Kind.JSON_SCHEMA:
            found.append(EmbeddedSchema(f"{within}@{name}", sub, sub.text))
        elif sub.kind is Kind.LARK:
            found += _in_lark(sub, f"{within}@{name}: ")
    for n, start in enumerate(_inline_starts(spec.text)):
        try:
            _, end = json.JSONDecoder().raw_decode(spec.text, start)
        except (json.JSONDecodeError, RecursionError):
            continue  # not JSON: `check_embedded` refuses it at its place
        schema = replace(spec, kind=Kind.JSON_SCHEMA, text=spec.text[start:end], subgrammars=())
        found.append(EmbeddedSchema(f"{within}%json #{n + 1}", schema, spec.text, start=start))
    return found


class MissingSub(ConstraintError):
    """An `@name` with no sub-grammar given for it: lint's G001 (a reference nothing defines)."""


def _refuse_missing_subs(spec: ConstraintSpec) -> None:
    """Exit 2 at the first `@name` no `--sub name=FILE` gives: each backend said "unknown grammar @answer"
    in its own words, then "every backend failed", and none said how to give it."""
    grammar = _lark_model(spec.text) if "@" in spec.text else None
    if grammar is None:
        return  # no @name, or a grammar the compile will say is wrong
    given = {name for name, _ in spec.subgrammars}
    for rule in grammar.rules:
        for node in walk(rule.body):
            if isinstance(node, Opaque) and node.what.startswith("@") and node.what[1:] not in given:
                name = node.what[1:]
                line, col = offset_to_line_col(spec.text, node.pos)
                raise MissingSub(
                    f"`@{name}` names a sub-grammar, and none was given for it",
                    location=Location(spec.origin or spec.name, line, col),
                    hint=f"pass --sub {name}=FILE (a .json schema, .lark, .gbnf or .regex file)"
                    + (f"; given: {', '.join(sorted(given))}" if given else ""),
                )


@lru_cache(maxsize=16)
def _lark_model(text: str):
    """The Lark reader's model of `text`, read once for every check here; None where it cannot read it."""
    try:
        return parse_lark(text)
    except (ParseError, RecursionError):
        return None


def _inline_starts(text: str) -> list[int]:
    """Where each inline `%json` schema's JSON starts: read by the Lark reader, so a `%json` inside a
    string, regex or comment is not one; by a plain scan where the reader cannot read the grammar (an
    extra match there only names more keywords, never fewer)."""
    if "%json" not in text:
        return []
    grammar = _lark_model(text)
    if grammar is None:
        return [m.end() for m in _INLINE.finditer(text)]
    starts = []
    for rule in grammar.rules:
        for node in walk(rule.body):
            if isinstance(node, Opaque) and node.what == "%json":
                starts.append(_INLINE.match(text, node.pos).end())
    return sorted(starts)


@lru_cache(maxsize=16)
def _in_tag(spec: ConstraintSpec) -> list[EmbeddedSchema]:
    try:
        doc = parse_json(spec.text, spec.origin)
    except UserError:
        return []
    found = []
    stack: list[tuple[object, tuple]] = [(doc, ())]
    while stack:  # iterative: parse_json bounds the depth, nothing here recurses
        value, path = stack.pop()
        if isinstance(value, dict):
            if value.get("type") == "json_schema" and "json_schema" in value:
                found.append(path + ("json_schema",))
                continue
            if len(path) == 2 and path[0] == "structures" and "schema" in value:  # SGLang's old shape
                found.append(path + ("schema",))
                continue
            stack += [(v, path + (k,)) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, path + (i,)) for i, v in enumerate(value)]
    out = []
    for path in sorted(found, key=lambda p: [str(x) for x in p]):
        schema = doc
        for key in path:
            schema = schema[key]
        pointer = pointer_of(path)
        text = json.dumps(schema, ensure_ascii=False)
        sub = replace(spec, kind=Kind.JSON_SCHEMA, text=text, subgrammars=())
        out.append(EmbeddedSchema(pointer, sub, spec.text, prefix=pointer))
    return out
