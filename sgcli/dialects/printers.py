"""Printing sgcli's grammar model (sgcli/dialects/grammar_model.py) as Lark or GBNF text.

The one reader per dialect (dialects/gbnf.py, dialects/lark.py, dialects/regex_parse.py) builds the
model with positions; these printers write it back in another dialect. What has no
equivalent in the target (a lookahead, `%json`, `@name`, a special token, a regex
lookaround) is a UserError naming the construct at its line:col, never a silent drop.
Anchors at the edges of a whole-output regex (`^...$`) mean nothing there and are dropped.
"""

from __future__ import annotations

import re

from sgcli.dialects.grammar_model import Alt, Chars, Grammar, Lit, Node, Opaque, Ref, Rep, Seq
from sgcli.errors import Location, UserError, offset_to_line_col

DIALECTS = {"lark": "Lark", "gbnf": "GBNF"}
ROOTS = {"lark": "start", "gbnf": "root"}
_MAX_CP = 0x10FFFF


class Printer:
    def __init__(self, grammar: Grammar, dialect: str, text: str, origin: str | None):
        self.g, self.dialect, self.text, self.origin = grammar, dialect, text, origin
        self.names = _names([r.name for r in grammar.rules], grammar.root, dialect)

    def fail(self, what: str, pos: int, hint: str | None = None) -> UserError:
        where = Location(self.origin, *offset_to_line_col(self.text, pos))
        return UserError(f"{what} has no equivalent in {DIALECTS[self.dialect]}", location=where, hint=hint)

    def grammar(self) -> str:
        sep = ": " if self.dialect == "lark" else " ::= "
        lines = [f"{self.names[r.name]}{sep}{self.node(r.body, top=True)}" for r in self.g.rules]
        return "\n".join(lines) + "\n"

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
        if len(nonempty) < len(printed):  # an empty alternative: the rest is optional
            if not nonempty:
                return '""'
            kept = [a for a, p in zip(node.alts, printed) if p]
            if len(nonempty) == 1 and _atomic(kept[0]):
                return nonempty[0] + "?"
            return f"({' | '.join(nonempty)})?"
        joined = " | ".join(printed)
        return joined if top or len(printed) == 1 else f"({joined})"

    def rep(self, node: Rep) -> str:
        inner = self.node(node.body, top=True)
        if not inner or node.max == 0:
            return ""
        if not _atomic(node.body):
            inner = f"({inner})"
        lo, hi = node.min, node.max
        if (lo, hi) in ((0, None), (1, None), (0, 1)):
            return inner + {(0, None): "*", (1, None): "+", (0, 1): "?"}[(lo, hi)]
        if self.dialect == "gbnf":
            return f"{inner}{{{lo},}}" if hi is None else f"{inner}{{{lo},{hi}}}" if lo != hi else f"{inner}{{{lo}}}"
        if hi is None:
            return f"({inner} ~ {lo} {inner}*)"
        return f"{inner} ~ {lo}..{hi}" if lo != hi else f"{inner} ~ {lo}"

    def string(self, value: str) -> str:
        return '"' + "".join(_escape(ch, '"\\', self.dialect) for ch in value) + '"'

    def chars(self, node: Chars) -> str:
        ranges = _merged(node.ranges)
        negated = node.negated
        if negated and not ranges:  # any character (GBNF `.`)
            negated, ranges = False, [(0, _MAX_CP)]
        body = ("^" if negated else "") + "".join(_class_item(lo, hi, self.dialect) for lo, hi in ranges)
        return f"/[{body}]/" if self.dialect == "lark" else f"[{body}]"


def _names(names: list[str], root: str, dialect: str) -> dict[str, str]:
    """Source names -> unique target names; the source's root becomes the target's root name."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for name in sorted(dict.fromkeys(names), key=lambda n: n != root):  # the root claims its name first
        if name == root:
            base = ROOTS[dialect]
        elif dialect == "lark":
            base = re.sub(r"[^a-z0-9_]", "_", name.lower())
            base = base if re.match(r"[a-z_]", base) else "r_" + base
        else:
            base = re.sub(r"[^A-Za-z0-9_-]", "_", name).lstrip("_") or "r"
        candidate, n = base, 1
        while candidate in used:
            candidate, n = f"{base}_{n}", n + 1
        used.add(candidate)
        out[name] = candidate
    return out


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


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str, special: str, dialect: str) -> str:
    cp = ord(ch)
    if ch in special:
        return "\\" + ch
    if ch in _NAMED:
        return _NAMED[ch]
    if cp < 32 or cp == 127:
        return f"\\x{cp:02x}" if dialect == "gbnf" else f"\\u{cp:04x}"
    return ch


def _class_item(lo: int, hi: int, dialect: str) -> str:
    def one(cp: int) -> str:
        if cp > 0xFFFF:  # \U + 8 digits: llama.cpp, xgrammar, Python's re and Rust's regex all read it
            return f"\\U{cp:08X}"
        if dialect == "gbnf" and chr(cp) in "-^":  # llama.cpp knows no \- or \^; hex escapes read everywhere
            return f"\\x{cp:02X}"
        return _escape(chr(cp), "\\]-[^/" if dialect == "lark" else "\\][", dialect)

    return one(lo) if lo == hi else f"{one(lo)}-{one(hi)}"


def _describe(what: str) -> str:
    return {"lookahead": "a lookahead (= ...)", "%json": "an inline %json schema"}.get(what, what)
