"""GBNF (llama.cpp) -> Lark, as plain Lark that xgrammar, llguidance and the lark library all read.

The GBNF is parsed into a small tree (alternatives, sequences, repetitions, literals,
character classes, rule references) and printed back as Lark: `root` becomes `start`,
rule names become lowercase identifiers, character classes become `/[...]/` regexes
with every character re-escaped, and `{m,n}` becomes Lark's `~ m..n`. Mistakes in the
GBNF are UserErrors at their line:col.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sgcli.errors import Location, UserError, offset_to_line_col

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<define>::=)
  | (?P<name>[A-Za-z0-9_-]+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<cls>\[\^?(?:[^\]\\]|\\.)*\])
  | (?P<repeat>\{\s*\d*\s*(?:,\s*\d*\s*)?\})
  | (?P<op>[|()*+?.])
""",
    re.X | re.S,
)

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^", "/": "/"}


@dataclass
class Tok:
    kind: str
    text: str
    pos: int


# The tree: ("alt", [seq...]) ("seq", [item...]) ("rep", node, lo, hi|None) ("lit", str)
# ("cls", negated, [(lo, hi)...]) ("ref", name, pos) ("any",)


def convert(text: str, origin: str | None = None) -> str:
    """The Lark text for a GBNF grammar whose root rule is `root`."""
    tokens = _tokenize(text, origin)
    rules = _split_rules(tokens, text, origin)
    names = _lark_names([name for name, _, _ in rules])
    defined = {name for name, _, _ in rules}
    if "root" not in defined:
        raise UserError(
            "the grammar has no 'root' rule", location=Location(origin, 1, 1), hint="GBNF starts at the rule named root"
        )
    lines = []
    for name, body, _ in rules:
        tree = _Parser(body, text, origin).parse()
        _check_refs(tree, defined, text, origin)
        lines.append(f"{names[name]}: {_emit(tree, names, top=True)}")
    return "\n".join(lines) + "\n"


def _error(message: str, text: str, pos: int, origin: str | None, hint: str | None = None) -> UserError:
    return UserError(message, location=Location(origin, *offset_to_line_col(text, pos)), hint=hint)


def _tokenize(text: str, origin: str | None) -> list[Tok]:
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            what = (
                "unterminated string or character class" if text[pos] in '"[' else f"unexpected character {text[pos]!r}"
            )
            raise _error(f"GBNF syntax error: {what}", text, pos, origin)
        if m.lastgroup != "space":
            tokens.append(Tok(m.lastgroup, m.group(), pos))
        pos = m.end()
    return tokens


def _split_rules(tokens: list[Tok], text: str, origin: str | None) -> list[tuple[str, list[Tok], int]]:
    """[(name, body tokens, position)]: a rule starts where a name is followed by '::='."""
    starts = [i for i in range(len(tokens) - 1) if tokens[i].kind == "name" and tokens[i + 1].kind == "define"]
    if not starts or starts[0] != 0:
        pos = tokens[0].pos if tokens else 0
        raise _error("GBNF syntax error: expected a rule 'name ::= ...'", text, pos, origin)
    rules, seen = [], {}
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(tokens)
        name_tok = tokens[start]
        if name_tok.text in seen:
            raise _error(
                f"rule '{name_tok.text}' is defined twice",
                text,
                name_tok.pos,
                origin,
                hint=f"merge it with the definition at line {offset_to_line_col(text, seen[name_tok.text])[0]}",
            )
        seen[name_tok.text] = name_tok.pos
        rules.append((name_tok.text, tokens[start + 2 : end], name_tok.pos))
    return rules


def _lark_names(names: list[str]) -> dict[str, str]:
    """GBNF names -> unique Lark rule names (lowercase, '_' for '-', root -> start)."""
    out, used = {}, set()
    for name in sorted(names, key=lambda n: n != "root"):  # root claims 'start' first
        base = "start" if name == "root" else re.sub(r"[^a-z0-9_]", "_", name.lower())
        if not re.match(r"[a-z_]", base):
            base = "r_" + base
        candidate, n = base, 1
        while candidate in used:
            candidate, n = f"{base}_{n}", n + 1
        used.add(candidate)
        out[name] = candidate
    return out


class _Parser:
    def __init__(self, tokens: list[Tok], text: str, origin: str | None):
        self.tokens, self.text, self.origin, self.i = tokens, text, origin, 0

    def _peek(self) -> Tok | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _fail(self, message: str, tok: Tok | None):
        pos = tok.pos if tok else (self.tokens[-1].pos + len(self.tokens[-1].text) if self.tokens else len(self.text))
        raise _error(f"GBNF syntax error: {message}", self.text, pos, self.origin)

    def parse(self):
        tree = self._alternatives()
        if self._peek() is not None:
            self._fail(f"unexpected {self._peek().text!r}", self._peek())
        return tree

    def _alternatives(self):
        seqs = [self._sequence()]
        while (t := self._peek()) is not None and t.text == "|":
            self.i += 1
            seqs.append(self._sequence())
        return ("alt", seqs)

    def _sequence(self):
        items = []
        while (t := self._peek()) is not None and t.text not in ("|", ")"):
            atom = self._atom()
            while (t := self._peek()) is not None and (t.text in ("*", "+", "?") or t.kind == "repeat"):
                self.i += 1
                atom = ("rep", atom, *_bounds(t, self))
            items.append(atom)
        return ("seq", items)

    def _atom(self):
        t = self._peek()
        self.i += 1
        if t.kind == "string":
            return ("lit", _unescape(t.text[1:-1], t, self))
        if t.kind == "cls":
            negated = t.text.startswith("[^")
            return ("cls", negated, _class_ranges(t.text[2 if negated else 1 : -1], t, self))
        if t.kind == "name":
            return ("ref", t.text, t.pos)
        if t.text == ".":
            return ("any",)
        if t.text == "(":
            inner = self._alternatives()
            close = self._peek()
            if close is None or close.text != ")":
                self._fail("missing ')'", close)
            self.i += 1
            return inner
        self._fail(f"unexpected {t.text!r}", t)


def _bounds(t: Tok, parser: _Parser) -> tuple[int, int | None]:
    if t.text == "*":
        return 0, None
    if t.text == "+":
        return 1, None
    if t.text == "?":
        return 0, 1
    inner = t.text[1:-1].replace(" ", "")
    lo_text, comma, hi_text = inner.partition(",")
    lo = int(lo_text) if lo_text else 0
    hi = (int(hi_text) if hi_text else None) if comma else lo
    if hi is not None and hi < lo:
        parser._fail(f"repetition {t.text} has max < min", t)
    return lo, hi


def _unescape(body: str, t: Tok, parser: _Parser) -> str:
    return "".join(chr(lo) for lo, _ in _chars(body, t, parser))


def _chars(body: str, t: Tok, parser: _Parser) -> list[tuple[int, int]]:
    """Code points of a GBNF string/class body, as (value, offset) pairs."""
    out, i = [], 0
    while i < len(body):
        if body[i] != "\\":
            out.append((ord(body[i]), i))
            i += 1
            continue
        esc = body[i + 1] if i + 1 < len(body) else ""
        widths = {"x": 2, "u": 4, "U": 8}
        if esc in widths:
            digits = body[i + 2 : i + 2 + widths[esc]]
            if len(digits) != widths[esc] or not all(c in "0123456789abcdefABCDEF" for c in digits):
                parser._fail(f"bad escape \\{esc}{digits}", Tok(t.kind, t.text, t.pos + i + 1))
            out.append((int(digits, 16), i))
            i += 2 + widths[esc]
        elif esc in _ESCAPES:
            out.append((ord(_ESCAPES[esc]), i))
            i += 2
        else:
            parser._fail(f"unknown escape \\{esc}", Tok(t.kind, t.text, t.pos + i + 1))
    return out


def _class_ranges(body: str, t: Tok, parser: _Parser) -> list[tuple[int, int]]:
    chars = _chars(body, t, parser)
    ranges, i = [], 0
    while i < len(chars):
        lo = chars[i][0]
        if i + 2 < len(chars) and body[chars[i + 1][1]] == "-":
            hi = chars[i + 2][0]
            if hi < lo:
                parser._fail("character range is backwards", t)
            ranges.append((lo, hi))
            i += 3
        else:
            ranges.append((lo, lo))
            i += 1
    return ranges


def _check_refs(tree, defined: set[str], text: str, origin: str | None) -> None:
    if tree[0] == "ref" and tree[1] not in defined:
        raise _error(f"undefined rule '{tree[1]}'", text, tree[2], origin, hint="define it or fix the name")
    for child in _children(tree):
        _check_refs(child, defined, text, origin)


def _children(tree) -> list:
    if tree[0] in ("alt", "seq"):
        return tree[1]
    if tree[0] == "rep":
        return [tree[1]]
    return []


def _emit(tree, names: dict[str, str], top: bool = False) -> str:
    kind = tree[0]
    if kind == "alt":
        seqs = [_emit(s, names) for s in tree[1]]
        nonempty = [s for s in seqs if s]
        if len(nonempty) < len(seqs):  # an empty alternative: the rest is optional
            if not nonempty:
                return '""'
            kept = [t for t, s in zip(tree[1], seqs) if s]
            if len(kept) == 1 and _atomic(kept[0]):
                return nonempty[0] + "?"
            return f"({' | '.join(nonempty)})?"
        joined = " | ".join(seqs)
        return joined if top or len(seqs) == 1 else f"({joined})"
    if kind == "seq":
        return " ".join(p for p in (_emit(i, names) for i in tree[1]) if p)
    if kind == "lit":
        return _lark_string(tree[1]) if tree[1] else ""
    if kind == "cls":
        return "/[" + ("^" if tree[1] else "") + "".join(_class_item(lo, hi) for lo, hi in tree[2]) + "]/"
    if kind == "ref":
        return names[tree[1]]
    if kind == "any":
        return r"/[\s\S]/"
    _, child, lo, hi = tree
    inner = _emit(child, names)
    if not inner:
        return ""
    if not _atomic(child):
        inner = f"({inner})"
    if (lo, hi) == (0, None):
        return inner + "*"
    if (lo, hi) == (1, None):
        return inner + "+"
    if (lo, hi) == (0, 1):
        return inner + "?"
    if hi is None:
        return f"({inner} ~ {lo} {inner}*)"
    if hi == 0:
        return ""
    return f"{inner} ~ {lo}..{hi}" if lo != hi else f"{inner} ~ {lo}"


def _atomic(tree) -> bool:
    if tree[0] in ("lit", "cls", "ref", "any"):
        return True
    if tree[0] in ("alt", "seq") and len(tree[1]) == 1:
        return _atomic(tree[1][0])
    return False


def _lark_string(value: str) -> str:
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _class_item(lo: int, hi: int) -> str:
    return _class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}"


def _class_char(cp: int) -> str:
    ch = chr(cp)
    if ch in "\\]-[^/":
        return "\\" + ch
    if ch in "\n\r\t":
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch]
    if cp < 32 or cp == 127:
        return f"\\x{cp:02x}"
    return ch
