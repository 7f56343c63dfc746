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

from sgcli.backends.base import CompileWarning
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
