"""Printing sgcli's grammar model (sgcli/dialects/grammar_model.py) as Lark or GBNF text.

The one reader per dialect (dialects/gbnf.py, dialects/lark.py, dialects/regex_parse.py) builds the
model with positions; these printers write it back in another dialect. What has no
equivalent in the target (a lookahead, `%json`, `@name`, a special token, a regex
lookaround) is a UserError naming the construct at its line:col, never a silent drop.
Anchors at the edges of a whole-output regex (`^...$`) mean nothing there and are dropped.

Characters are written in the target's own syntax, as its real parsers read them back (checked
against xgrammar's, llguidance's and the lark library's in tests/test_convert_roundtrip.py):
GBNF has no `\\-` or `\\^` (llama.cpp and llguidance refuse them), and xgrammar reads every
hex digit after `\\x` (`[\\x2D0-9]` is U+02D0 to 9 there), so `-` goes raw at the end of a
class and a hex digit right after a `\\x` escape is escaped too; llguidance's GBNF reader
garbles `\\u`/`\\U`, so non-ASCII characters are written as themselves. Lark strings take
`\\u` with four digits everywhere (xgrammar refuses `\\x` and `\\U` there), regex classes a
backslash before each of `\\ ] [ ^ - /`. In both, `^` never opens a class: xgrammar's Lark
regexes read `[\\^` and `[\\x5E` as a negation, so it goes last, and alone it is the string "^".
"""

from __future__ import annotations

import re

from sgcli.dialects.grammar_model import MAX_CODE_POINT, Alt, Chars, Grammar, Lit, Node, Opaque, Ref, Rep, Seq
from sgcli.errors import Location, UserError, offset_to_line_col

DIALECTS = {"lark": "Lark", "gbnf": "GBNF"}
ROOTS = {"lark": "start", "gbnf": "root"}


class Printer:
    def __init__(self, grammar: Grammar, dialect: str, text: str, origin: str | None, braces: bool = False):
        """`braces`: bounded repetitions as `x{m,n}` in Lark too (llguidance's spelling; the lark
        library reads only `x ~ m..n`, which llguidance 1.8 refuses)."""
        self.g, self.dialect, self.text, self.origin = grammar, dialect, text, origin
        self.names = _names([r.name for r in grammar.rules], grammar.root, dialect)
        self.braces = braces or dialect == "gbnf"

    def fail(self, what: str, pos: int, hint: str | None = None) -> UserError:
        where = Location(self.origin, *offset_to_line_col(self.text, pos))
        return UserError(f"{what} has no equivalent in {DIALECTS[self.dialect]}", location=where, hint=hint)

    def grammar(self) -> str:
        sep = ": " if self.dialect == "lark" else " ::= "
        lines = [f"{self.names[r.name]}{sep}{self.rule_body(r.body)}".rstrip(" ") for r in self.g.rules]
        return "\n".join(lines) + "\n"

    def rule_body(self, node: Node) -> str:
        """A rule's body; an empty alternative stays one (`"" | x`, Lark `| x`), in its place.

        Not `(x)?`: that wraps the body in a rule of its own, and xgrammar's masks then grow with
        every step of a right recursion such as `s ::= "" | c s` (seconds per mask after 100
        characters of a JSON string in an email format, where `"" | c s` stays flat)."""
        empty = '""' if self.dialect == "gbnf" else ""
        if not isinstance(node, Alt):
            return self.node(node, top=True) or empty
        return " | ".join(self.node(a) or empty for a in node.alts).strip()

    def node(self, node: Node, top: bool = False) -> str:
        if isinstance(node, Alt):
            return self.alt(node, top)
        if isinstance(node, Seq):
            return " ".join(p for p in (self.item(i) for i in node.items) if p)
        if isinstance(node, Lit):
            return self.string(node.text) if node.text else ""
        if isinstance(node, Chars):
            return self.chars(node)
        if isinstance(node, Ref):
            return self.names[node.name]
        if isinstance(node, Rep):
            return self.rep(node)
        if isinstance(node, Opaque):
            if node.what in ("anchor ^", "anchor $"):
                return ""
            raise self.fail(_describe(node.what), node.pos, hint="rewrite it without this, or keep the source dialect")
        raise self.fail(type(node).__name__, node.pos)

    def item(self, node: Node) -> str:
        """An element of a sequence (alt() parenthesizes alternatives that are not a rule's top)."""
        return self.node(node)

    def alt(self, node: Alt, top: bool) -> str:
        printed = [self.node(a) for a in node.alts]
        nonempty = list(dict.fromkeys(p for p in printed if p))
        if "" in printed:  # an empty alternative: the rest is optional
            if not nonempty:
                return ""
            kept = [a for a, p in zip(node.alts, printed) if p]
            if len(nonempty) == 1:  # through rep(), so that `"" | x+` is `x*`
                return self.rep(Rep(node.pos, kept[0], 0, 1))
            return f"({' | '.join(nonempty)})?"
        joined = " | ".join(printed)
        return joined if top or len(printed) == 1 else f"({joined})"

    def rep(self, node: Rep) -> str:
        lo, hi, body = node.min, node.max, node.body
        # llguidance's GBNF reader drops the parentheses of a repetition's repetition (`(x+)?`
        # becomes `x+?`, an error): `(x+)?` is written `x*`, `(x{1})?` `x?`, `(x{2,3})?` `(x{2,3} | "")`
        while isinstance(body, Rep) and (body.min, body.max) == (1, 1):
            body = body.body
        while isinstance(body, Rep) and (lo, hi) in _OPERATORS and (body.min, body.max) in _OPERATORS:
            lo, hi = lo * body.min, None if hi is None or body.max is None else 1
            body = body.body
        inner = self.node(body, top=True)
        if not inner or hi == 0:
            return ""
        if self.dialect == "gbnf" and isinstance(body, Rep) and (lo, hi) == (0, 1):
            return f'({inner} | "")'
        if not _atomic(body):
            inner = f"({inner})"
        if (lo, hi) in ((0, None), (1, None), (0, 1)):
            return inner + {(0, None): "*", (1, None): "+", (0, 1): "?"}[(lo, hi)]
        if self.braces:
            return f"{inner}{{{lo},}}" if hi is None else f"{inner}{{{lo},{hi}}}" if lo != hi else f"{inner}{{{lo}}}"
        if hi is None:
            return f"({inner} ~ {lo} {inner}*)"
        return f"{inner} ~ {lo}..{hi}" if lo != hi else f"{inner} ~ {lo}"

    def string(self, value: str) -> str:
        if self.dialect == "gbnf":
            return '"' + _gbnf_chars([ord(ch) for ch in value], '"\\') + '"'
        return '"' + "".join(_lark_char(ord(ch), '"\\', string=True) for ch in value) + '"'

    def chars(self, node: Chars) -> str:
        ranges = _merged(node.ranges)
        negated = node.negated
        scalar = _without_surrogates(ranges)
        if scalar or negated:
            ranges = scalar
        if negated and not ranges:  # any character
            if self.dialect == "gbnf":
                return "."
            negated, ranges = False, [(0, MAX_CODE_POINT)]
        if not negated and ranges and ranges[0][0] == _CARET:  # first, `^` would negate: it goes last
            if ranges == [(_CARET, _CARET)]:  # alone: xgrammar's Lark regexes read `[\^` and `[\x5E` as `[^`
                return self.string("^")
            lo, hi = ranges.pop(0)
            ranges = ([(lo + 1, hi)] if hi > lo else []) + ranges + [(_CARET, _CARET)]
        if self.dialect == "gbnf":
            return _gbnf_class(ranges, negated)
        items = [
            _lark_char(lo, _LARK_CLASS) + ("" if lo == hi else "-" + _lark_char(hi, _LARK_CLASS)) for lo, hi in ranges
        ]
        # xgrammar reads every hex digit after an escape, even one written as an escape itself
        # (`[\\u0001\\u0030]` took neither): items that start with a hex digit go first
        if any(_ESCAPED_END.search(a) and b[:1] in _HEX_DIGITS for a, b in zip(items, items[1:])):
            items = sorted(items, key=lambda item: item[:1] not in _HEX_DIGITS)
        return f"/[{'^' if negated else ''}{''.join(items)}]/"


def _without_surrogates(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The class's ranges with no surrogate for an end: no text holds a surrogate, so the class means
    the same, and llguidance refuses a `\ud800`. A range across the surrogates stays one range, and
    two that meet across them become one: llguidance reads `[^\x01-\ud7ff\ue000-\U0001f600]` as
    taking U+D7FF and U+E000 (xgrammar's JSON strings exclude surrogates: xgrammar_json.json_safe)."""
    out: list[tuple[int, int]] = []
    for lo, hi in ranges:
        lo = 0xE000 if 0xD800 <= lo <= 0xDFFF else lo
        hi = 0xD7FF if 0xD800 <= hi <= 0xDFFF else hi
        if lo > hi:
            continue
        if out and out[-1][1] == 0xD7FF and lo == 0xE000:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def _names(names: list[str], root: str, dialect: str) -> dict[str, str]:
    """Source names -> unique target names; the source's root becomes the target's root name.
    GBNF names are unique as llguidance's reader sees them too: it renames `-` to `_`, `fooBar` to
    `foo_bar`, changes case and `root` to `start` (so `TEXT` and `text` would collide there)."""
    out: dict[str, str] = {}
    key = _llguidance_name if dialect == "gbnf" else str
    used: set[str] = {"start"} if dialect == "gbnf" else set()
    for name in sorted(dict.fromkeys(names), key=lambda n: n != root):  # the root claims its name first
        if name == root:
            base = ROOTS[dialect]
        elif dialect == "lark":
            base = re.sub(r"[^a-z0-9_]", "_", name.lower())
            base = base if re.match(r"[a-z_]", base) else "r_" + base
        else:
            base = re.sub(r"[^A-Za-z0-9_-]", "_", name).lstrip("_") or "r"
        candidate, n = base, 1
        while key(candidate) in used:
            candidate, n = f"{base}_{n}", n + 1
        used.add(key(candidate))
        out[name] = candidate
    return out


def _llguidance_name(name: str) -> str:
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name.replace("-", "_")).lower()


def _atomic(node: Node) -> bool:
    if isinstance(node, (Lit, Chars, Ref)):
        return True
    if isinstance(node, (Alt, Seq)):
        items = node.alts if isinstance(node, Alt) else node.items
        return len(items) == 1 and _atomic(items[0])
    return False


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


_OPERATORS = ((0, None), (1, None), (0, 1))  # *, +, ?
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_ESCAPED_END = re.compile(r"\\(u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})$")
_GBNF_CLASS = "\\]["
_LARK_CLASS = "\\][^-/"
_DASH, _CARET = 0x2D, 0x5E


def _gbnf_chars(parts: list, special: str, *, hex_first: bool = False) -> str:
    """Code points (ints) and syntax (strs, written as they are) as GBNF text: a backslash before
    `special`, `\\n \\r \\t`, `\\xHH` for other ASCII controls, for the first part where `hex_first`,
    and for a hex digit right after such an escape (xgrammar would read it as part of the escape),
    everything else as itself."""
    out: list[str] = []
    after_hex = hex_first
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            after_hex = False
            continue
        ch = chr(part)
        hexed = (after_hex and (ch in _HEX_DIGITS or not out)) or ((part < 32 or part == 127) and ch not in _NAMED)
        if hexed:
            out.append(f"\\x{part:02X}")
        elif ch in special:
            out.append("\\" + ch)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif 0xD800 <= part <= 0xDFFF:  # a lone surrogate cannot be written as UTF-8
            out.append(f"\\u{part:04X}")
        else:
            out.append(ch)
        after_hex = hexed
    return "".join(out)


def _gbnf_class(ranges: list[tuple[int, int]], negated: bool) -> str:
    """`[...]` where llama.cpp, xgrammar and llguidance read the same set: `-` raw and last, cut
    out of the ranges that hold it (`\\-` is an error to llama.cpp and llguidance)."""
    parts: list = []
    dash = False
    for lo, hi in ranges:
        if lo <= _DASH <= hi:
            dash = True
            pieces = [r for r in ((lo, _DASH - 1), (_DASH + 1, hi)) if r[0] <= r[1]]
        else:
            pieces = [(lo, hi)]
        for a, b in pieces:
            parts += [a] if a == b else [a, "-", b]
    # a `^` that the cut `-` left first would negate the class (`[-^]` printed `[^-]`): written `\x5E`
    body = _gbnf_chars(parts + (["-"] if dash else []), _GBNF_CLASS, hex_first=parts[:1] == [_CARET])
    return f"[{'^' if negated else ''}{body}]"


def _lark_char(cp: int, special: str, *, string: bool = False) -> str:
    """One character in a Lark string (`string`) or regex class: a backslash before `special`,
    `\\uHHHH` for controls and other unprintable BMP characters (four digits: read alike by
    xgrammar, llguidance and the lark library), `\\U` + 8 digits beyond in a regex; a string
    keeps those as themselves (xgrammar and llguidance read no `\\U` in strings)."""
    ch = chr(cp)
    if ch in special:
        return "\\" + ch
    if ch in _NAMED:
        return _NAMED[ch]
    if ch.isprintable():
        return ch
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return ch if string else f"\\U{cp:08X}"


def _describe(what: str) -> str:
    return {"lookahead": "a lookahead (= ...)", "%json": "an inline %json schema"}.get(what, what)
