"""`pattern`s a backend's JSON grammar cannot take as written: each is relaxed or left out of that
grammar, and sgcli's schema checker enforces the whole pattern on the decoded string.

Three ways a pattern goes wrong inside a backend:
- llguidance cannot match look-around, backreferences or `\\b`, and gives up deciding some patterns
  beside a length; either way it refused the whole schema (its adapter relaxes or leaves them out);
- xgrammar and outlines-core match a pattern against the string's raw JSON text, not its decoded
  value: a character JSON must escape (`"`, `\\`, U+0000-U+001F) that the pattern admits is written
  raw, so the string ends early or holds a control character and the output is not JSON. `^a"b$` let
  xgrammar write `"a"b"`, and `.` let outlines-core write a raw quote (`escape_gaps`).
A left-out pattern's grammar writes an ordinary JSON string, escapes included. Each becomes a compile
warning at the pattern's pointer, which `keyword_coverage.compiled_gaps` turns into a gap the checker
enforces.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from sgcli.backends.base import CompileWarning, SchemaKeywords
from sgcli.constraints.jsonpos import pointer_of

_ESCAPED = (0x22, 0x5C, *range(0x20))  # what a JSON string must escape: ", \ and the control characters


@dataclass(frozen=True)
class PatternGap:
    """A `pattern` in the subschema at `path` that a backend's grammar cannot take: `why`, and what its
    grammar gets instead: `relaxed`, or None (left out)."""

    path: tuple
    why: str
    relaxed: str | None

    def warning(self) -> CompileWarning:
        instead = "its grammar takes the pattern without it" if self.relaxed is not None else "its grammar omits it"
        message = f"`pattern` {self.why}: {instead}, and sgcli's schema checker enforces the whole pattern"
        return CompileWarning(message, pointer_of(self.path + ("pattern",)))


def at(schema, path: tuple):
    for part in path:
        schema = schema[part]
    return schema


def patterns(schema):
    """(path of the subschema, its `pattern`) for each string `pattern` in `schema`."""
    from sgcli.backends.schema_warnings import iter_subschemas

    for path, node in iter_subschemas(schema):
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            yield path, pattern


def with_patterns(schema: dict, gaps: list[PatternGap]) -> dict:
    """A copy of `schema` with each of those patterns relaxed (or removed)."""
    out = copy.deepcopy(schema)
    for gap in gaps:
        node = at(out, gap.path)
        if gap.relaxed is None:
            node.pop("pattern", None)
        else:
            node["pattern"] = gap.relaxed
    return out


# a regex escape for a character JSON escapes: \\ \n \t ... \x22 \u005c ... \cJ
_ESCAPE = re.compile(r"\\(?:[\\nrtfv0ae]|c.|x(?:[01][0-9A-Fa-f]|22|5[cC])|u00(?:[01][0-9A-Fa-f]|22|5[cC]))")


def admits_escaped(pattern: str, *, anywhere: bool) -> bool:
    """Whether `pattern` lets a backend that matches the raw text write a character JSON must escape.
    xgrammar (`anywhere` False) writes raw what the pattern spells out (`"`, `\\\\`, `\\n`, `\\u0022`,
    outside a negated class) and excludes the rest (`.`, `\\s`, `[^x]`), as measured; outlines-core
    (`anywhere`) excludes nothing, so any class, `.` or negation admitting one counts (and a pattern
    sgcli's reader cannot take, to be safe)."""
    if not anywhere:
        return _spells_escaped(pattern)
    from sgcli.dialects.grammar_model import Chars, Lit, walk
    from sgcli.dialects.regex_parse import ParseError, parse_regex

    try:
        node = parse_regex(pattern).node
    except ParseError:
        return True
    for n in walk(node):
        if isinstance(n, Lit) and any(ord(c) < 0x20 or c in '"\\' for c in n.text):
            return True
        if isinstance(n, Chars) and any(n.contains(cp) for cp in _ESCAPED):
            return True
    return False


def _spells_escaped(pattern: str) -> bool:
    i, negated = 0, None  # negated: None outside a class, else whether the class is [^...]
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            m = _ESCAPE.match(pattern, i)
            if m and not negated:
                return True
            i += len(m.group()) if m else 2
            continue
        if negated is None and ch == "[":
            negated = pattern.startswith("^", i + 1)
            i += 2 if negated else 1
            if pattern.startswith("]", i):  # a `]` right after `[` or `[^` is a member
                i += 1
            continue
        if negated is not None and ch == "]":
            negated = None
        elif (ch == '"' or ord(ch) < 0x20) and not negated:
            return True
        i += 1
    return False


def escape_gaps(schema, backend: str, *, anywhere: bool) -> list[PatternGap]:
    """Each `pattern` of `schema` that `backend` would write unescaped (`admits_escaped`), left out."""
    if not isinstance(schema, dict):
        return []
    why = f"admits a character JSON escapes, which {backend} would write raw (the output would not be JSON)"
    return [PatternGap(path, why, None) for path, p in patterns(schema) if admits_escaped(p, anywhere=anywhere)]


# A cheap look at the schema's text before any walk: most schemas hold no look-around or backreference.
# (two searches, each with a literal prefix re scans for: 4x quicker than one alternation, 0.14 ms on 233 KB)
_UNMATCHABLE_HINTS = (re.compile(r"\(\?<?[=!]"), re.compile(r"\\\\[bBk1-9]"))


def declared_pattern_gaps(spec, schema, backend: str, table: SchemaKeywords | None) -> list[PatternGap]:
    """The `pattern`s of the JSON Schema `spec` (parsed: `schema`) that `backend`'s grammar cannot take as
    written, by its declared table (`raw_patterns`, `unmatchable`): known before compiling, so `auto`
    ranks backends by them and the checker is planned for them (keyword_coverage.schema_gaps)."""
    if table is None or not isinstance(schema, dict) or '"pattern"' not in spec.text:
        return []
    found = []
    if table.raw_patterns:
        found += escape_gaps(schema, backend, anywhere=table.raw_patterns == "any")
    if table.unmatchable:
        found += unmatchable_patterns(spec.text, schema, backend, table.unmatchable)
    if table.letter_anchors and _LETTER_ANCHOR_HINT.search(spec.text):
        found += letter_anchor_gaps(schema, backend)
    more = rust_class_gaps(schema, backend) if table.rust_classes and "[" in spec.text else []
    more += negated_escape_gaps(schema, backend) if table.negated_escapes and "[^" in spec.text else []
    if table.wide_shorthands and "\\\\" in spec.text:
        more += _gaps_where(schema, lambda p: reads_shorthand_wider(p, table.wide_shorthands), SHORTHAND_WHY, backend)
    if table.optional_repeats and ("?" in spec.text or "{0" in spec.text):
        more += _gaps_where(schema, optional_repeat, OPTIONAL_REPEAT_WHY, backend)
    for gap in more:  # a pattern left out once: the first reason names it
        if all(g.path != gap.path for g in found):
            found.append(gap)
    return found


SHORTHAND_WHY = "has a shorthand class (`\\W`, `\\D`, ...) that {backend} reads wider than jsonschema (Python's re)"
OPTIONAL_REPEAT_WHY = "has an optional group holding an unbounded repetition, which {backend} takes alone"


def _gaps_where(schema, misread, why: str, backend: str) -> list[PatternGap]:
    """Each `pattern` that `misread(pattern)` says `backend` reads otherwise: left out of its grammar."""
    return [PatternGap(path, why.format(backend=backend), None) for path, p in patterns(schema) if misread(p)]


_SHORTHAND = re.compile(r"\\.|\[\^?|\]")


def reads_shorthand_wider(pattern: str, wide: frozenset[str]) -> bool:
    """Whether `pattern` holds a shorthand class in `wide` (one inside a negated class counts as its
    complement: `[^\\w]` as `\\W`)."""
    negated = None  # None outside a class, else whether the class is [^...]
    for m in _SHORTHAND.finditer(pattern):
        token = m.group()
        if token.startswith("\\"):
            letter = token[1]
            if letter in "dDwWsS" and (letter.swapcase() if negated else letter) in wide:
                return True
        elif token.startswith("[") and negated is None:
            negated = token == "[^"
        elif token == "]":
            negated = None
    return False


def optional_repeat(pattern: str) -> bool:
    """Whether some optional part of `pattern` (`?`, `{0,1}`) holds an unbounded repetition."""
    from sgcli.dialects.grammar_model import ParseError, Rep, walk
    from sgcli.dialects.regex_parse import parse_regex

    try:
        node = parse_regex(pattern).node
    except (ParseError, RecursionError):
        return False  # the backend says what is wrong with it
    return any(
        isinstance(n, Rep)
        and n.min == 0
        and n.max == 1
        and any(isinstance(inner, Rep) and inner.max is None for inner in walk(n.body))
        for n in walk(node)
    )


def name_pattern_misread(pattern: str, table: SchemaKeywords) -> str | None:
    """Why a `patternProperties` name pattern means otherwise to the backend of `table` than to
    jsonschema (the readings of `declared_pattern_gaps` that apply to property names), or None."""
    for on, misread, why in (
        (table.rust_classes, rust_reads_class_otherwise, "a class Rust's regex syntax reads as set syntax"),
        (table.negated_escapes, _negates_escaped, "a negated class that leaves out a quote or backslash"),
        (table.optional_repeats, optional_repeat, "an optional group holding an unbounded repetition"),
        (table.letter_anchors, _LETTER_ANCHOR.search, "`\\A`, `\\Z` or `\\z`, read as a letter"),
        (bool(table.wide_shorthands), lambda p: reads_shorthand_wider(p, table.wide_shorthands), "a wide shorthand"),
    ):
        if on and misread(pattern):
            return why
    return None


def negated_escape_gaps(schema, backend: str) -> list[PatternGap]:
    """Each `pattern` with a negated class that leaves out `"` or `\\`, which `backend` still takes when
    written as an escape: left out of its grammar, so the checker enforces it on the decoded string."""
    why = f"has a negated class that leaves out a quote or backslash, which {backend} still takes escaped"
    return [PatternGap(path, why, None) for path, p in patterns(schema) if _negates_escaped(p)]


def _negates_escaped(pattern: str) -> bool:
    from sgcli.dialects.grammar_model import Chars, ParseError, walk
    from sgcli.dialects.regex_parse import parse_regex

    try:
        node = parse_regex(pattern).node
    except (ParseError, RecursionError):
        return "[^" in pattern  # unread: conservative
    return any(
        isinstance(n, Chars) and n.negated and any(lo <= c <= hi for lo, hi in n.ranges for c in (0x22, 0x5C))
        for n in walk(node)
    )


def rust_class_gaps(schema, backend: str) -> list[PatternGap]:
    """Each `pattern` with a character class that Rust's regex crate reads as set syntax (a nested `[`,
    `[:alpha:]`, `&&`, `--`, `~~`, or a `]` first in the class) where jsonschema reads literal characters:
    left out of `backend`'s grammar, so the checker enforces it as jsonschema reads it."""
    why = f"has a character class that {backend} (Rust's regex syntax) reads as set syntax, jsonschema as characters"
    return [PatternGap(path, why, None) for path, p in patterns(schema) if rust_reads_class_otherwise(p)]


def rust_reads_class_otherwise(pattern: str) -> bool:
    """Whether some character class of `pattern` means one thing to Rust's regex crate and another to
    Python's re / ECMAScript: set operations and nested classes are Rust's alone."""
    i, n, in_class = 0, len(pattern), False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if not in_class:
            if ch == "[":
                in_class = True
                i += 2 if pattern.startswith("[^", i) else 1
                if i < n and pattern[i] == "]":  # `[]a]`: a `]` to Rust, an empty class to ECMAScript
                    return True
                continue
        elif ch == "[" or pattern.startswith(("&&", "--", "~~"), i):
            return True
        elif ch == "]":
            in_class = False
        i += 1
    return False


_LETTER_ANCHOR_HINT = re.compile(r"\\\\[AZz]")  # in the JSON text: `\\Z`
_LETTER_ANCHOR = re.compile(r"(?<!\\)(?:\\\\)*\\[AZz]")  # `\Z` after an even run of backslashes


def letter_anchor_gaps(schema, backend: str) -> list[PatternGap]:
    """Each `pattern` with `\\A`, `\\Z` or `\\z`, which `backend` reads as a letter (ECMAScript's reading)
    and jsonschema and sgcli's checker (Python's re) as an anchor: left out of its grammar, so the checker
    enforces it (kept, the grammar demanded a final `Z` that the check then refused)."""
    why = f"has `\\A`, `\\Z` or `\\z`, which {backend} reads as a letter where the check (Python's re) anchors"
    return [PatternGap(path, why, None) for path, p in patterns(schema) if _LETTER_ANCHOR.search(p)]


def unmatchable_patterns(text: str, schema, backend: str, unmatchable: frozenset[str]) -> list[PatternGap]:
    """Each `pattern` with a regex feature `backend` cannot match (llguidance: look-around, a
    backreference, `\\b`), which would make it refuse the whole schema (AWS's `^(?!aws:).*` tag keys did,
    in a quarter of cfn-lint's CloudFormation schemas). Its grammar takes the pattern relaxed
    (`relaxed`: a superset that keeps the pattern's classes and bounds), and sgcli's schema checker
    enforces the whole pattern with Python's `re`, which has all of these. A `patternProperties` key is
    left to the backend: it decides which properties a subschema covers."""
    if not any(hint.search(text) for hint in _UNMATCHABLE_HINTS):
        return []
    from sgcli.dialects.regex_parse import ParseError, parse_regex

    found = []
    for path, pattern in patterns(schema):
        try:
            features = [f for f in parse_regex(pattern).features if f.what in unmatchable]
        except ParseError:
            continue  # the backend says what is wrong with it
        if features:
            why = f"has a {features[0].what}, which {backend} cannot match"
            found.append(PatternGap(path, why, relaxed(pattern, features)))
    return found


def relaxed(pattern: str, features) -> str:
    """`pattern` with each assertion made empty and each backreference any text: every string the
    pattern matches, the relaxed one matches too (so the checker, not the grammar, narrows it)."""
    out, at = [], 0
    for f in sorted(features, key=lambda f: (f.pos, -f.end)):
        if f.pos < at:
            continue  # inside one already replaced
        out += [pattern[at : f.pos], "(?:[\\s\\S]*)" if f.what == "backreference" else "(?:)"]
        at = f.end
    return "".join(out) + pattern[at:]
