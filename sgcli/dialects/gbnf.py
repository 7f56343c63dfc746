"""A reader for GBNF (llama.cpp) and xgrammar's EBNF that keeps positions.

It accepts the union of both dialects, because linting should find structural mistakes
in a grammar whichever engine it was written for; what a particular backend rejects is
reported by that backend itself (rule S001). A rule's body runs until the next
`name ::=`, so bodies may span lines (xgrammar) or not (llama.cpp).
"""

from __future__ import annotations

import re

from sgcli.dialects.grammar_model import (
    MAX_STACKED,
    Alt,
    Chars,
    Grammar,
    Lit,
    Node,
    Opaque,
    ParseError,
    Ref,
    Rep,
    Rule,
    Seq,
    repetition,
    stacked_error,
    walk,
)
from sgcli.dialects.reader import GBNF_CLASS_ESCAPES, GBNF_ESCAPES, Reader
from sgcli.dialects.regex_parse import parse_regex

# xgrammar's names take dots too (its JSON Schema translation names rules after `$defs` keys such as
# `io.k8s.api.core.v1.Pod`); a dot that does not join two name parts is llama.cpp's any-character
_NAME = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
_BRACES = re.compile(r"\{\s*(\d*)\s*(,?)\s*(-1|\d*)\s*\}")  # xgrammar prints {n, -1} for {n,}


def parse_gbnf(text: str, root: str = "root") -> Grammar:
    """The grammar in `text`; raises ParseError at the first thing it cannot read."""
    r = Reader(text, ("#",), GBNF_ESCAPES)
    grammar = r.grammar = Grammar("gbnf", root)
    r.skip_space()
    while not r.eof():
        m = _NAME.match(text, r.pos)
        if not m:
            raise r.error(f"expected a rule name, found {r.peek()!r}")
        name_pos = r.pos
        r.pos = m.end()
        r.skip_space()
        r.expect("::=", "'::=' after the rule name")
        body = _alternatives(r, nested=False)
        grammar.rules.append(Rule(m.group(), body, name_pos))
        r.skip_space()
    return grammar


def _rule_starts_here(r: Reader) -> bool:
    m = _NAME.match(r.text, r.pos)
    if not m:
        return False
    after = m.end()
    while after < len(r.text) and r.text[after] in " \t\r\n":
        after += 1
    return r.text.startswith("::=", after)


def _alternatives(r: Reader, *, nested: bool) -> Node:
    start = r.pos
    alts = [_sequence(r, nested=nested)]
    while True:
        r.skip_space()
        if r.peek() != "|":
            break
        r.pos += 1
        alts.append(_sequence(r, nested=nested))
    return alts[0] if len(alts) == 1 else Alt(start, alts)


def _sequence(r: Reader, *, nested: bool) -> Node:
    after_separator = r.pos
    r.skip_space()
    start = r.pos
    items: list[Node] = []
    while True:
        before = r.pos
        r.skip_space()
        ch = r.peek()
        rule_ends = r.eof() or ch == ")" or (not nested and _rule_starts_here(r))
        if not nested and not rule_ends and (items or ch == "|") and "\n" in r.text[before : r.pos]:
            r.grammar.continuations.append(r.pos)  # an element or `|` opening a line: llama.cpp's rule ended above
        if rule_ends or ch == "|":
            break
        if nested and _rule_starts_here(r):
            raise r.error("a new rule starts before this group is closed; a ')' is missing")
        element_start = r.pos
        items.append(_postfix(r, _element(r), element_start))
    if not items:
        r.grammar.empty_alternatives.append(after_separator)
        return Lit(start, "")
    return items[0] if len(items) == 1 else Seq(start, items)


def _element(r: Reader) -> Node:
    start = r.pos
    ch = r.peek()
    if ch == '"':
        return Lit(start, r.string())
    if ch == "[":
        return _char_class(r)
    if r.startswith("(="):  # xgrammar's lookahead assertion: consumes nothing
        r.pos += 2
        r.open_group(start)
        inner = _alternatives(r, nested=True)
        r.skip_space()
        r.expect(")", "')' closing the lookahead")
        r.close_group()
        return Opaque(start, "lookahead", nullable=True, sample="", children=[inner])
    if ch == "(":
        r.pos += 1
        r.open_group(start)
        inner = _alternatives(r, nested=True)
        r.skip_space()
        r.expect(")", "')' closing the group")
        r.close_group()
        return inner
    if ch == ".":
        r.pos += 1
        return Chars(start, [], negated=True)
    if r.startswith("Regex("):  # xgrammar: Regex("pattern", json_string=true)
        return _regex_macro(r)
    m = _NAME.match(r.text, r.pos)
    if m:
        r.pos = m.end()
        return Ref(start, m.group())
    raise r.error(f"unexpected {ch!r}")


def _regex_macro(r: Reader) -> Node:
    """xgrammar's `Regex("...")` element: the pattern read by the regex reader (positions at its string)."""

    r.pos += len("Regex(")
    r.skip_space()
    if r.peek() != '"':
        raise r.error("expected the pattern string of Regex(...)")
    at = r.pos
    pattern = r.string()
    end = r.text.find(")", r.pos)
    if end < 0:
        raise r.error("')' missing after Regex(...)", at)
    options = r.text[r.pos : end]
    r.pos = end + 1
    try:
        node = parse_regex(pattern, lambda i: at).node
    except ParseError as exc:
        raise r.error(f"in Regex(...): {exc.message}", at) from None
    if "json_string=true" in options.replace(" ", ""):
        _json_safe(node)
    return node


_JSON_ESCAPED = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]


def _json_safe(node: Node) -> None:
    """xgrammar's `json_string=true`: the pattern matches a JSON string's raw text, and its classes
    (`.`, `[^x]`, `\\s`) never take what JSON escapes (`"`, `\\`, control characters), measured; the same
    classes here, so a conversion accepts what xgrammar does."""
    for n in walk(node):
        if isinstance(n, Chars):
            if n.negated:
                n.ranges = n.ranges + _JSON_ESCAPED
            else:
                n.ranges = [part for lo, hi in n.ranges for part in _minus_escaped(lo, hi)]


def _minus_escaped(lo: int, hi: int) -> list[tuple[int, int]]:
    parts = [(lo, hi)]
    for elo, ehi in _JSON_ESCAPED:
        parts = [p for a, b in parts for p in ((a, min(b, elo - 1)), (max(a, ehi + 1), b)) if p[0] <= p[1]]
    return parts


def _postfix(r: Reader, node: Node, start: int) -> Node:
    """Repetition operators after an element; a repetition is located where the element's
    source starts (its '(' for a group)."""
    for _ in range(MAX_STACKED + 1):
        blanks = r.pos
        while r.text[blanks : blanks + 1] in (" ", "\t"):
            blanks += 1
        if r.text[blanks : blanks + 1] in ("*", "+", "?", "{"):  # `"a" *`: llama.cpp and xgrammar read it
            r.pos = blanks
        op_pos = r.pos
        found = repetition(r.text, r.pos, _BRACES)
        if found is None:
            if r.peek() == "{":
                raise r.error("bad repetition braces; write {n}, {n,}, {n,m} or {,m}")
            node.span = (start, r.pos)
            return node
        lo, hi, r.pos = found
        node = Rep(start, node, lo, hi, op_pos, r.pos)
    raise stacked_error(start)


def _char_class(r: Reader) -> Chars:
    start = r.pos
    r.pos += 1
    negated = r.peek() == "^"
    if negated:
        r.pos += 1
    ranges: list[tuple[int, int]] = []
    while True:
        if r.eof() or r.peek() == "\n":
            raise r.error("unterminated character class", start)
        if r.peek() == "]":
            r.pos += 1
            return Chars(start, ranges, negated)
        at = r.pos
        lo = _class_char(r)
        if r.peek() == "-" and r.text[r.pos + 1 : r.pos + 2] not in ("]", ""):
            r.pos += 1
            hi = _class_char(r)
            if ord(hi) < ord(lo):
                raise r.error(f"character range {lo!r}-{hi!r} is backwards", start)
            ranges.append((ord(lo), ord(hi)))
        else:  # a member alone: a lone surrogate is refused as in a string
            ranges.append((ord(r.whole(lo, at)), ord(lo)))


def _class_char(r: Reader) -> str:
    if r.peek() == "\\":
        return r.escape(GBNF_CLASS_ESCAPES)
    ch = r.peek()
    r.pos += 1
    return ch
