"""The one description of a constraint that flows from the CLI to every backend.

A `ConstraintSpec` says *what* to enforce (kind + text) and *where it came from*
(origin, for error messages); `JsonOptions` carries the JSON-formatting knobs that
backends map to their own equivalents. Backends never see CLI flags.
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field, replace

from sgcli.constraints.jsonpos import key_position, locate
from sgcli.constraints.source_map import SourceMap
from sgcli.errors import Location, UserError, did_you_mean, offset_to_line_col
from sgcli.limits import Limits, current_limits


class Kind(str, enum.Enum):
    JSON_SCHEMA = "json_schema"
    REGEX = "regex"
    EBNF = "ebnf"  # GBNF / xgrammar EBNF
    LARK = "lark"
    CHOICE = "choice"
    STRUCTURAL_TAG = "structural_tag"
    LLGUIDANCE = "llguidance"  # llguidance's top-level grammar JSON: {"grammars": [...]}
    NONE = "none"  # unconstrained

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Kind.JSON_SCHEMA: "JSON Schema",
    Kind.REGEX: "regex",
    Kind.EBNF: "EBNF/GBNF",
    Kind.LARK: "Lark",
    Kind.CHOICE: "choice",
    Kind.STRUCTURAL_TAG: "structural tags",
    Kind.LLGUIDANCE: "llguidance top-level grammar",
    Kind.NONE: "unconstrained",
}

# File extension -> kind, for `--grammar FILE` and the grammar-development commands.
EXTENSION_KINDS = {
    ".json": Kind.JSON_SCHEMA,
    ".ebnf": Kind.EBNF,
    ".gbnf": Kind.EBNF,
    ".lark": Kind.LARK,
    ".regex": Kind.REGEX,
    ".llg.json": Kind.LLGUIDANCE,
    ".re": Kind.REGEX,
}


# The layout `generate` (and every command that compiles for it: compare-backends, bench --generate,
# lint, compile) uses when no layout flag is given: no whitespace between JSON tokens. Flexible
# whitespace (`[ \t\n\r]*` between tokens) let base models emit newlines until --max-tokens (issue 29);
# compact answered the same prompt in 9 tokens. `JsonOptions()` itself stays flexible: the schema's
# whole language, for the commands that judge texts a person wrote (masks, test).
GENERATE_WHITESPACE = "compact"
MAX_INDENT = 64  # --indent: more is no layout anyone reads, and xgrammar's grammar grows with it
MAX_WHITESPACE = 1024  # --max-whitespace: xgrammar's compile grows with it (1024: ~0.2 s, 16 MB)


@dataclass(frozen=True)
class JsonOptions:
    """How JSON may be laid out. `None` means: the backend's default.

    Each option means the same on every backend (backends/json_layout.py translates):
    `whitespace_pattern` P: between two JSON tokens, either nothing or one match of P.
    (One exception, warned of: xgrammar's compact JSON inside a structural tag allows one whitespace
    character between tokens, backends/structural_tag.py `layout_warnings`.)
    """

    whitespace: str = "flexible"  # "flexible" | "compact"
    whitespace_pattern: str | None = None
    indent: int | None = None
    max_whitespace: int | None = None
    strict_properties: bool = False
    # Compiled to generate from, not to judge given texts: a backend may narrow the language to a
    # sound subset that compiles faster (xgrammar's strict_mode; measured in docs/grammar-development.md).
    for_generation: bool = False

    def __post_init__(self) -> None:
        """The same conflict rules for every command: contradictory layouts are exit 2, never a silent pick."""
        if self.whitespace not in ("flexible", "compact"):
            raise UserError(
                f"--json-whitespace must be flexible or compact, not '{self.whitespace}'."
                + did_you_mean(self.whitespace, ("flexible", "compact"))
            )
        if self.indent is not None and not 0 <= self.indent <= MAX_INDENT:
            raise UserError(f"--indent must be from 0 to {MAX_INDENT}")
        if self.max_whitespace is not None and not 1 <= self.max_whitespace <= MAX_WHITESPACE:
            raise UserError(f"--max-whitespace must be from 1 to {MAX_WHITESPACE}")
        given = [
            flag
            for flag, on in (
                ("--json-whitespace compact", self.whitespace == "compact"),
                ("--indent", self.indent is not None),
                ("--whitespace-pattern", self.whitespace_pattern is not None),
                ("--max-whitespace", self.max_whitespace is not None),
            )
            if on
        ]
        if len(given) > 1:
            raise UserError(
                f"{given[0]} and {given[1]} both given; they describe different JSON layouts",
                hint="keep one of " + ", ".join(given),
            )
        if self.whitespace_pattern is not None:
            _check_pattern(self.whitespace_pattern)

    def describe(self) -> str:
        parts = [self.whitespace]
        if self.indent is not None:
            parts.append(f"indent={self.indent}")
        if self.whitespace_pattern is not None:
            parts.append(f"pattern={self.whitespace_pattern!r}")
        if self.max_whitespace is not None:
            parts.append(f"max_ws={self.max_whitespace}")
        if self.strict_properties:
            parts.append("strict")
        return ",".join(parts)


@dataclass(frozen=True)
class ConstraintSpec:
    """A constraint of kind `kind` with text `text`, read from `origin`."""

    kind: Kind
    text: str = ""
    origin: str | None = None  # file path, "<stdin>", "--regex", ...
    choices: tuple[str, ...] = ()
    # Named sub-grammars a Lark grammar refers to as `@name` (e.g. a JSON Schema).
    subgrammars: tuple[tuple[str, ConstraintSpec], ...] = ()
    json_options: JsonOptions = field(default_factory=JsonOptions)
    # A schema bundled from several files (`schema_bundle`): where each part of `text` came from.
    source_map: SourceMap | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return self.origin or f"<{self.kind.value}>"

    def where(self, line: int | None, col: int | None) -> Location:
        """The file position of `line`:`col` of `text`: the file the user wrote that part in."""
        if self.source_map is None:
            return Location(self.origin, line, col)
        return self.source_map.location(line, col, self.origin)

    def place(self, path) -> Location:
        """Where the value at `path` (keys and indexes) of this JSON text was written."""
        return self.where(*(locate(self.text, path) or (None, None)))

    def place_key(self, pointer: str) -> Location:
        """Where the key naming the value at `pointer` was written (`jsonpos.key_position`)."""
        return self.where(*(key_position(self.text, pointer) or (None, None)))

    def for_generation(self) -> ConstraintSpec:
        """This constraint as a command that generates compiles it (`JsonOptions.for_generation`), its
        sub-grammars too (a `--sub` schema is generated from as a `--schema` is)."""
        subs = tuple((name, sub.for_generation()) for name, sub in self.subgrammars)
        return replace(self, json_options=replace(self.json_options, for_generation=True), subgrammars=subs)

    def takes_json_layout(self) -> bool:
        """Whether the JSON layout options shape this constraint: a JSON Schema, a structural tag's JSON,
        a Lark grammar's JSON Schema sub-grammars. A regex, GBNF or Lark grammar writes its own whitespace."""
        if self.kind in (Kind.JSON_SCHEMA, Kind.STRUCTURAL_TAG):
            return True
        return any(sub.kind is Kind.JSON_SCHEMA for _, sub in self.subgrammars)

    def schema(self) -> dict | bool:
        """The parsed JSON Schema (kind JSON_SCHEMA only); raises a positioned UserError."""
        return parse_json(self.text, self.origin)

    def as_regex(self) -> str:
        """A regex equivalent, for kinds that have one (choice -> alternation)."""
        if self.kind is Kind.REGEX:
            return self.text
        if self.kind is Kind.CHOICE:  # longest first: outlines-core never reached `yesterday` after `yes`
            return "|".join(_regex_escape(c) for c in sorted(self.choices, key=len, reverse=True))
        raise ValueError(f"{self.kind.label} has no regex form")


MAX_DEPTH = 100  # grammar and regex groups: every reader of them (lint's, the backends') recurses per group
# JSON levels. A schema level is two JSON levels under `properties` (one under `items`), so a 200-level schema
# fits; the parsers and walks that recurse per level (json, jsonpos, jsonschema's meta-validation, which runs
# with room for it: `sgcli.limits.deep_call`) are safe to it.
MAX_JSON_DEPTH = 512


def too_deep(what: str) -> str:
    """The one wording for input nested past MAX_JSON_DEPTH (JSON, and the YAML test files that hold it)."""
    return f"{what} nested more than {MAX_JSON_DEPTH} levels deep (sgcli's depth limit)"


class NotJsonNumber(ValueError):
    """A number JSON has no value for: NaN, Infinity, one past a float's range (1e999) or an integer
    longer than Python reads (4,300 digits). Python's json module takes the first three; nothing
    downstream can (the request body, jsonschema's checks, the grammar backends)."""

    def __init__(self, literal: str, why: str):
        super().__init__(f"{literal[:40]} is not a JSON number sgcli can use: {why}")
        self.literal = literal


def _constant(name: str):
    raise NotJsonNumber(name, "NaN and Infinity are not JSON (RFC 8259)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NotJsonNumber(text, "it is past the largest float (about 1.8e308)")
    return value


def json_int(text: str) -> int:
    """json's `parse_int` that raises NotJsonNumber, not a bare ValueError, past Python's int limit."""
    try:
        return int(text)
    except ValueError:  # past sys.get_int_max_str_digits()
        raise NotJsonNumber(text, f"an integer of {len(text)} digits is too long") from None


def strict_json_loads(text: str, object_pairs_hook=None):
    """`json.loads` that refuses NaN, Infinity, infinite floats and over-long integers (NotJsonNumber)."""
    return json.loads(
        text, parse_constant=_constant, parse_float=_float, parse_int=json_int, object_pairs_hook=object_pairs_hook
    )


class DuplicateKeys:
    """An `object_pairs_hook` that notes the first key an object holds twice (json keeps the last
    silently; other readers keep the first): `.key` after a parse, None when every key was unique."""

    def __init__(self):
        self.key: str | None = None

    def __call__(self, pairs: list) -> dict:
        obj = dict(pairs)
        if self.key is None and len(obj) < len(pairs):
            seen = set()
            self.key = next(k for k, _ in pairs if k in seen or seen.add(k))
        return obj


class TooDeep(ValueError):
    """JSON nested more than MAX_JSON_DEPTH levels: json and every walk after it recurse per level."""


def loads_within_depth(text: str | bytes, loads=json.loads):
    """`loads(text)`, refusing nesting past MAX_JSON_DEPTH with TooDeep rather than a RecursionError
    (in json's reader, or later in whatever walks the value): every JSON sgcli reads is bounded so,
    a file the user gave or a server's reply."""
    try:
        value = loads(text)
    except RecursionError:
        value = _TOO_DEEP
    # each level opens a bracket: a text with few of them needs no walk (most schemas: 5-10 us saved)
    opens = (b"{", b"[") if isinstance(text, bytes) else ("{", "[")
    if value is _TOO_DEEP or (
        text.count(opens[0]) + text.count(opens[1]) > MAX_JSON_DEPTH and not _within_depth(value, MAX_JSON_DEPTH)
    ):
        raise TooDeep(too_deep("JSON"))
    return value


_TOO_DEEP = object()


def parse_json(text: str, origin: str | None):
    """Parse JSON input; bad syntax, numbers JSON has no value for and nesting past MAX_JSON_DEPTH
    are the user's to fix, with line:col."""
    try:
        return loads_within_depth(text, strict_json_loads)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"invalid JSON: {exc.msg}",
            location=Location(origin, exc.lineno, exc.colno),
            hint="fix the JSON syntax at that position",
        ) from None
    except NotJsonNumber as exc:
        at = text.find(exc.literal)
        line, col = offset_to_line_col(text, at) if at >= 0 else (None, None)
        raise UserError(
            f"invalid JSON: {exc}", location=Location(origin, line, col), hint="write a finite number there"
        ) from None
    except TooDeep:
        line, col = offset_to_line_col(text, _deep_offset(text, MAX_JSON_DEPTH))
        raise UserError(
            too_deep("JSON"),
            location=Location(origin, line, col),
            hint="move nested parts into $defs and refer to them with $ref",
        ) from None


def _within_depth(value, limit: int) -> bool:
    """Iterative, so a deep document cannot exhaust the stack while being measured."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return False
                stack.append((child, depth + 1))
    return True


def json_depth(value) -> int:
    """Nesting levels of a parsed JSON value (a scalar is 0), measured without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _deep_offset(text: str, limit: int) -> int:
    """Offset of the first bracket that opens level limit+1 (strings skipped)."""
    import re

    depth = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return m.start()
        elif token in "]}":
            depth -= 1
    return 0


def _regex_escape(s: str) -> str:
    """Escape for the regex dialect every backend shares (no `re.escape` quirks like '\\ ')."""
    special = set("\\.^$|?*+()[]{}/")
    return "".join("\\" + ch if ch in special else ch for ch in s)


def _check_pattern(pattern: str) -> None:
    """A typo in --whitespace-pattern fails here, before any backend compiles it."""
    import re

    if pattern == "":
        raise UserError("--whitespace-pattern is empty", hint="for no whitespace use --json-whitespace compact")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise UserError(
            f"--whitespace-pattern is not a valid regex: {exc.msg} at {exc.pos}",
            hint="e.g. --whitespace-pattern '[ ]{0,2}'",
        ) from None


def check_size(spec: ConstraintSpec, limits: Limits | None = None) -> None:
    """Refuse a constraint larger than `--max-constraint-bytes` before anything reads it further."""
    limits = limits or current_limits()
    if not limits.max_bytes:
        return
    for name, part in ((None, spec), *spec.subgrammars):
        size = len(part.text.encode("utf-8"))
        if size > limits.max_bytes:
            where = f"{part.origin}: " if part.origin else ""
            raise UserError(
                f"{where}the {part.kind.label} is {size:,} bytes, over the limit of {limits.max_bytes:,} bytes"
                + (f" (sub-grammar @{name})" if name else ""),
                hint="raise the limit with --max-constraint-bytes (0 turns it off)",
            )
