"""A reader for the regex dialect backends share, into the grammar model, with positions.

Used for `.regex` files, Lark `/.../` terminals and JSON Schema `pattern`s. Besides
the structure (so the whitespace, repetition and shortest-sentence analyses apply to
regexes too), it records the features a token-level automaton cannot express:
lookaround, backreferences, word boundaries and anchors in the middle of a pattern.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache

from sgcli.constraints.regex_dialects import ECMA, RUST
from sgcli.constraints.spec import MAX_DEPTH
from sgcli.dialects.grammar_model import (
    MAX_CODE_POINT,
    MAX_STACKED,
    Alt,
    Chars,
    Lit,
    Node,
    NotReadAsWritten,
    Opaque,
    ParseError,
    Rep,
    Seq,
    repetition,
    stacked_error,
)
from sgcli.lone_surrogates import HALF_PAIR_HINT, half_pair, lone_surrogate

WHITESPACE = [  # Unicode's White_Space: Rust's `\s` (llguidance, outlines-core), the `regex` package's
    (9, 13),
    (32, 32),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
]
# ECMAScript's `\s` (xgrammar, JSON Schema's `pattern`): WhiteSpace and LineTerminator, U+FEFF in, U+0085 out
ECMA_WHITESPACE = sorted({*WHITESPACE, (0xFEFF, 0xFEFF)} - {(0x85, 0x85)})
DIGITS = [(48, 57)]
WORD = [(48, 57), (65, 90), (95, 95), (97, 122)]
_CLASS_LETTERS = frozenset("dDwWsS")
# `.`: Rust's stops at a newline only; ECMAScript's at every line terminator
_DOT = {RUST: [(10, 10)], ECMA: [(10, 10), (13, 13), (0x2028, 0x2029)]}


@cache
def class_escape(letter: str, dialect: str) -> tuple[tuple[int, int], ...]:
    """The code point ranges of `\\d`, `\\w` or `\\s` (`letter` in either case: the complement's are these,
    negated) as `dialect` reads them: ECMAScript's are ASCII digits and word characters, Rust's (so the
    lark library's and llguidance's) Unicode's (`٣` a digit, `é` a word character; `\\w` is 817 ranges,
    read off the `regex` package, which reads them as Rust does)."""
    letter = letter.lower()
    if letter == "s":
        return tuple(WHITESPACE if dialect == RUST else ECMA_WHITESPACE)
    if dialect != RUST:
        return tuple(DIGITS if letter == "d" else WORD)
    import array

    import regex

    every = array.array("I", range(MAX_CODE_POINT + 1)).tobytes().decode("utf-32-le", "surrogatepass")
    return tuple((m.start(), m.end() - 1) for m in regex.finditer("\\" + letter + "+", every))


_CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0", "a": "\a", "e": "\x1b"}


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every code point outside `ranges` (sorted, disjoint), as ranges: `\\S` inside a class."""
    out, at = [], 0
    for lo, hi in ranges:
        if lo > at:
            out.append((at, lo - 1))
        at = max(at, hi + 1)
    return out + ([(at, MAX_CODE_POINT)] if at <= MAX_CODE_POINT else [])


_QUANT = re.compile(r"\{(\d*)(,?)(\d*)\}")


_LOOKAROUND_PREFIXES = (
    ("?<=", "lookbehind"),
    ("?<!", "negative lookbehind"),
    ("?=", "lookahead"),
    ("?!", "negative lookahead"),
)
LOOKAROUNDS = frozenset(what for _, what in _LOOKAROUND_PREFIXES)  # zero-width assertions, by `what`


@dataclass(frozen=True)
class RegexFeature:
    """Something in a regex that a finite automaton over tokens cannot express."""

    what: str  # "lookahead", "negative lookahead", "lookbehind", ..., "backreference"
    pos: int  # file offset where it starts
    end: int  # file offset just past it
    source: str  # the regex text of the feature


@dataclass
class ParsedRegex:
    node: Node
    features: list[RegexFeature]
    # inline flags, `(?i)`, `(?s:...)`: they change the language (case, `.`, `^`/`$`, verbose syntax), which
    # the model of the node does not carry: a conversion refuses them (`dialects/convert.py`)
    flags: list[RegexFeature] = field(default_factory=list)


def parse_regex(pattern: str, to_file: Callable[[int], int] = lambda i: i, dialect: str = ECMA) -> ParsedRegex:
    """Parse `pattern`; node positions are `to_file(index)` (which must also accept
    len(pattern), for the end of a feature at the very end). Raises ParseError (file offset).
    `dialect` says what `\\d`, `\\w`, `\\s` and `.` hold: ECMAScript's (JSON Schema's `pattern`,
    xgrammar) or Rust's (a Lark terminal, llguidance and outlines-core: Unicode classes)."""
    p = _Parser(pattern, to_file, dialect)
    node = p.alternatives(top=True)
    if p.i < len(pattern):
        raise ParseError("unbalanced ')' in regex", to_file(p.i))
    return ParsedRegex(node, p.features, p.flags)


_SAMPLES = "aA0 _-.:/@éÉßΩж中٣"  # a few letters, digits, marks of common scripts and punctuation


@lru_cache(maxsize=256)
def _class_sample(text: str) -> str | None:
    """One character the Unicode class `text` (`\\p{Lu}`, `[\\p{L}_]`) takes, from `_SAMPLES`, as the `regex`
    package reads it; None where none does (the sample stays unknown, as before)."""
    import regex

    try:
        return next((ch for ch in _SAMPLES if regex.fullmatch(text, ch)), None)
    except regex.error:
        return None


def octal_escape(src: str, i: int, dialect: str) -> str | None:
    """The escape at `i` (its backslash) as written, where Python's re reads it as a backreference or an
    octal escape (`\\1`, `\\041`), which Rust's regex and ECMAScript's u flag refuse; ECMAScript's `\\0`
    alone is NUL. ASCII digits only: `\\²` is none. None for any other escape."""
    m = re.compile(r"\\(?:[0-7]{1,3}|[89])").match(src, i)
    if m is None or (m.group() == "\\0" and dialect != RUST and src[m.end() : m.end() + 1] not in tuple("89")):
        return None
    return m.group()


class _Parser:
    def __init__(self, src: str, to_file: Callable[[int], int], dialect: str):
        self.src = src
        self.dialect = dialect
        self.i = 0
        self.to_file = to_file
        self.features: list[RegexFeature] = []
        self.flags: list[RegexFeature] = []
        self.depth = 0  # open groups: the parser and every walk of its model recurse per group

    def error(self, message: str) -> ParseError:
        return ParseError(message, self.to_file(min(self.i, max(len(self.src) - 1, 0))))

    def feature(self, what: str, start: int) -> None:
        self.features.append(RegexFeature(what, self.to_file(start), self.to_file(self.i), self.src[start : self.i]))

    def alternatives(self, top: bool = False) -> Node:
        start = self.i
        alts = [self.sequence(top)]
        while self.i < len(self.src) and self.src[self.i] == "|":
            self.i += 1
            alts.append(self.sequence(top))
        return alts[0] if len(alts) == 1 else Alt(self.to_file(start), alts)

    def sequence(self, top: bool) -> Node:
        start = self.i
        items: list[Node] = []
        while self.i < len(self.src) and self.src[self.i] not in "|)":
            atom_start = self.i
            ch = self.src[self.i]
            if ch in "^$":
                self.i += 1
                at_edge = (ch == "^" and not items) or (ch == "$" and self._at_sequence_end())
                if not (top and at_edge):
                    self.feature("anchor in the middle of the pattern", atom_start)
                items.append(Opaque(self.to_file(atom_start), f"anchor {ch}", nullable=True, sample=""))
                continue
            items.append(self.quantified(self.atom(), atom_start))
        if not items:
            return Lit(self.to_file(start), "")
        return items[0] if len(items) == 1 else Seq(self.to_file(start), items)

    def _at_sequence_end(self) -> bool:
        return self.i >= len(self.src) or self.src[self.i] in "|)"

    def quantified(self, node: Node, start: int) -> Node:
        """Quantifiers after an atom; a repetition is located where the atom starts."""
        for _ in range(MAX_STACKED + 1):
            found = None
            if self.i < len(self.src):
                try:
                    found = repetition(self.src, self.i, _QUANT)
                except NotReadAsWritten as exc:  # placed in the file, as the parser's own errors are
                    raise NotReadAsWritten(exc.message, self.to_file(exc.pos)) from None
            if found is None:
                node.span = (self.to_file(start), self.to_file(self.i - 1) + 1)
                return node
            op = self.i
            lo, hi, self.i = found
            if self.i < len(self.src) and self.src[self.i] in "?+":  # lazy / possessive: same language
                self.i += 1
            node = Rep(self.to_file(start), node, lo, hi, self.to_file(op), self.to_file(self.i - 1) + 1)
        raise stacked_error(self.to_file(start))

    def atom(self) -> Node:
        start = self.i
        ch = self.src[self.i]
        pos = self.to_file(start)
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.char_class()
        if ch == ".":
            self.i += 1
            return Chars(pos, list(_DOT[self.dialect]), negated=True)
        if ch == "\\":
            return self.escape_atom()
        if ch in "*+?":
            raise self.error(f"'{ch}' has nothing to repeat")
        self.i += 1
        return Lit(pos, ch)

    def group(self) -> Node:
        start = self.i
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError(f"groups nested more than {MAX_DEPTH} deep (sgcli's depth limit)", self.to_file(start))
        node = self._group(start)
        self.depth -= 1
        return node

    def _group(self, start: int) -> Node:
        self.i += 1
        for prefix, what in _LOOKAROUND_PREFIXES:
            if self.src.startswith(prefix, self.i):
                self.i += len(prefix)
                inner = self.alternatives()
                self.close(start)
                self.feature(what, start)
                return Opaque(self.to_file(start), what, nullable=True, sample="", children=[inner])
        if self.src.startswith("?P=", self.i):  # (?P=name)
            end = self.src.find(")", self.i)
            if end < 0:
                raise self.error("unclosed (?P=name)")
            self.i = end + 1
            self.feature("backreference", start)
            return Opaque(self.to_file(start), "backreference", nullable=None)
        if self.src.startswith("?", self.i):
            m = re.compile(r"\?(?:P?<[A-Za-z_]\w*>|[a-zA-Z-]*:|[a-zA-Z-]+\))").match(self.src, self.i)
            if not m:
                raise self.error("unknown group syntax")
            self.i = m.end()
            if m.group() != "?:" and not m.group().startswith(("?<", "?P<")):  # (?i), (?s:...)
                self.flags.append(
                    RegexFeature("inline flags", self.to_file(start), self.to_file(self.i), self.src[start : self.i])
                )
            if m.group().endswith(")"):  # (?i) applies flags; matches nothing itself
                return Lit(self.to_file(start), "")
        inner = self.alternatives()
        self.close(start)
        return inner

    def close(self, start: int) -> None:
        if self.i >= len(self.src) or self.src[self.i] != ")":
            self.i = start
            raise self.error("unclosed group '('")
        self.i += 1

    def escape_atom(self) -> Node:
        start = self.i
        pos = self.to_file(start)
        ch = self.after_backslash()
        if ch in _CLASS_LETTERS:
            return Chars(pos, list(class_escape(ch, self.dialect)), ch.isupper())
        if ch in "bB":
            self.feature("word boundary" if ch == "b" else "non-word-boundary", start)
            return Opaque(pos, f"\\{ch}", nullable=True, sample="")
        if ch in "AzZG":
            return Opaque(pos, f"anchor \\{ch}", nullable=True, sample="")
        if ch in "123456789k":
            if ch == "k":
                end = self.src.find(">", self.i)
                self.i = end + 1 if end > 0 else self.i
            while self.i < len(self.src) and self.src[self.i] in "0123456789":
                self.i += 1
            self.feature("backreference", start)
            return Opaque(pos, "backreference", nullable=None)
        if ch in "pP":
            if self.i < len(self.src) and self.src[self.i] == "{":
                end = self.src.find("}", self.i)
                self.i = end + 1 if end > 0 else self.i + 1
            else:
                self.i += 1
            return Opaque(pos, "unicode class", nullable=False, sample=_class_sample(self.src[start : self.i]))
        self.i = start
        return Lit(pos, self.whole(self.escaped_char(), start))

    def whole(self, ch: str, start: int) -> str:
        """`ch`, written at `start`, unless it is a lone surrogate: Rust's regex refuses one, and xgrammar
        wrote its three bytes, which no UTF-8 text holds. (A class's range may end on one, as xgrammar's
        printed JSON classes do: `Chars.holds_text` judges the range.)"""
        if lone_surrogate(ch) is not None:
            raise ParseError(f"{half_pair(self.src[start : self.i])}: {HALF_PAIR_HINT}", self.to_file(start))
        return ch

    def _unknown_letter(self, ch: str) -> ParseError:
        """`\\Q`, `\\N`, `\\R`, `\\h`: an error to Python's re (so to jsonschema), another thing to each
        engine that reads it (a quoted run, a newline class): never the letter it was read as."""
        self.i -= 2
        return self.error(f"unknown escape \\{ch}: Python's re refuses it and the regex engines read it apart")

    def after_backslash(self) -> str:
        """The character after the backslash the cursor is on; the cursor moves past both."""
        self.i += 1
        if self.i >= len(self.src):
            raise self.error("the regex ends with a backslash")
        self.i += 1
        return self.src[self.i - 1]

    def escaped_char(self) -> str:
        """One character written with a backslash; the cursor is on the backslash."""
        written = octal_escape(self.src, self.i, self.dialect)
        if written:  # `[\041-\176]` was read as NUL, "4", "1", ...: Python's octal is no escape elsewhere
            raise self.error(
                f"{written} is an octal escape to Python's re and an error (a backreference) to Rust's regex "
                "and ECMAScript's with the u flag: write the character as \\xHH"
            )
        ch = self.after_backslash()
        if ch in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[ch]
        if ch in "xuU":
            if self.i < len(self.src) and self.src[self.i] == "{":
                end = self.src.find("}", self.i)
                if end < 0:
                    raise self.error(f"unclosed \\{ch}{{...}} escape")
                digits, self.i = self.src[self.i + 1 : end], end + 1
            else:
                width = {"x": 2, "u": 4, "U": 8}[ch]  # \U: Python's and Rust's regexes (Lark terminals)
                digits = self.src[self.i : self.i + width]
                self.i += width
            try:
                return chr(int(digits, 16))
            except (ValueError, OverflowError):
                raise self.error(f"bad \\{ch} escape") from None
        if ch == "c" and self.i < len(self.src) and self.src[self.i].isascii() and self.src[self.i].isalpha():
            self.i += 1  # ECMAScript's control escape, as xgrammar reads it: \cA is U+0001
            return chr(ord(self.src[self.i - 1]) % 32)
        if ch.isascii() and ch.isalpha():
            raise self._unknown_letter(ch)
        return ch  # \. \/ \\ \( ...

    def char_class(self) -> Node:
        start = self.i
        self.i += 1
        negated = self.i < len(self.src) and self.src[self.i] == "^"
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first, unicode = True, False
        while True:
            if self.i >= len(self.src):
                self.i = start
                raise self.error("unclosed character class '['")
            ch = self.src[self.i]
            if ch == "]" and not first:
                self.i += 1
                if unicode:  # `[\p{L} ]`: a class the ranges here do not spell out
                    return Opaque(
                        self.to_file(start),
                        "unicode class",
                        nullable=False,
                        sample=_class_sample(self.src[start : self.i]),
                    )
                return Chars(self.to_file(start), ranges, negated)
            first = False
            if self.src.startswith(("\\p", "\\P"), self.i):
                self.i += 2
                end = self.src.find("}", self.i) if self.src.startswith("{", self.i) else self.i
                self.i = (end if end >= 0 else self.i) + 1
                unicode = True
                continue
            if ch == "[" and self.src.startswith("[:", self.i):
                raise self.error("POSIX classes like [:alpha:] are not read by sgcli")
            if ch == "[" or self.src.startswith(("&&", "--", "~~"), self.i):
                raise self.error("nested classes and class set operations are not read by sgcli")
            if ch == "\\" and self.i + 1 < len(self.src) and self.src[self.i + 1] in _CLASS_LETTERS:
                letter = self.src[self.i + 1]
                sub = list(class_escape(letter, self.dialect))
                self.i += 2
                ranges.extend(_complement(sub) if letter.isupper() else sub)  # [\s\S] is any character
                continue
            at = self.i
            lo = self.class_char()
            if self.src.startswith("-", self.i) and self.i + 1 < len(self.src) and self.src[self.i + 1] != "]":
                self.i += 1
                if self.src.startswith("\\", self.i) and self.src[self.i + 1 : self.i + 2] in _CLASS_LETTERS:
                    raise self.error("a class escape cannot end a character range")
                hi = self.class_char()
                if ord(hi) < ord(lo):
                    raise self.error(f"character range {lo!r}-{hi!r} is backwards")
                ranges.append((ord(lo), ord(hi)))
            else:
                ranges.append((ord(self.whole(lo, at)), ord(lo)))

    def class_char(self) -> str:
        if self.src.startswith("\\b", self.i):  # backspace inside a class, in every regex dialect
            self.i += 2
            return "\b"
        if self.src[self.i] == "\\":
            return self.escaped_char()
        ch = self.src[self.i]
        self.i += 1
        return ch
