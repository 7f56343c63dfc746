"""A Lark grammar as llguidance and xgrammar should read it (`for_backends`): what lark means, respelled
where the backends would read it otherwise. The reader (`dialects/lark.py`) finds the spans; this module
only rewrites text.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sgcli.dialects.grammar_model import ParseError
from sgcli.dialects.lark import parse_lark

_PRIORITY = re.compile(r"\.-?\d+[ \t]*:(?!:)")


# lark's own common.ESCAPED_STRING (`".*?(?<!\\)(\\\\)*?"`) as one regex: no newline inside; both
# backends' built-in one takes a raw newline, which the lark check then refuses
EXACT_ESCAPED_STRING = r'/"(?:[^"\\\n]|\\[^\n])*"/'
_IMPORT_ONE = re.compile(r"^([ \t]*)%import[ \t]+common\.ESCAPED_STRING(?:[ \t]*->[ \t]*(\w+))?[ \t]*$", re.M)
_IMPORT_MANY = re.compile(r"^([ \t]*)%import[ \t]+common[ \t]*\(([^)]*)\)", re.M)


@lru_cache(maxsize=16)
def for_backends(text: str) -> tuple[str, int]:
    """(a Lark grammar as llguidance and xgrammar should read it, how many priorities it left out).
    - Rule and terminal priorities (`NAME.2:`) are left out: neither backend takes them, and they change
      no text the grammar accepts (they choose among parses and tokenizations of one text; the lark check,
      Earley, reads the same language). Syncode's Go and SQL grammars have them.
    - `%import common.ESCAPED_STRING` becomes lark's own definition (`EXACT_ESCAPED_STRING`).
    As it was where sgcli's reader cannot read it."""
    text = _evaluated_escapes(_escaped_controls(_exact_common(text)))
    if not _PRIORITY.search(text):
        return text, 0
    try:
        spans = parse_lark(text).priority_spans
    except ParseError:
        return text, 0
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text, len(spans)


_NUMERIC_ESCAPE = re.compile(r"\\\\|\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}")
_REGEX_SYNTAX = set("\\^$.|?*+()[]{}-")


def _evaluated_escapes(text: str) -> str:
    """Inside /regex/ terminals, a `\\xHH`, `\\uHHHH` or `\\UHHHHHHHH` that spells regex syntax, written as
    that syntax: lark evaluates these escapes before it compiles the regex (`/a\\x2b/` is `a+`, `/\\x5cd/`
    is `\\d`), where both backends read the character itself. Other escapes mean the same either way."""
    if "\\x" not in text and "\\u" not in text and "\\U" not in text:
        return text
    try:
        spans = parse_lark(text).regex_spans
    except ParseError:
        return text

    def evaluated(m: re.Match) -> str:
        if m[0] == "\\\\":
            return m[0]
        code = int(m[0][2:], 16)
        if code > 0x10FFFF:  # no character: left for the backends (and the reader) to refuse at its place
            return m[0]
        ch = chr(code)
        return ch if ch in _REGEX_SYNTAX else m[0]

    for start, end in sorted(spans, reverse=True):
        text = text[:start] + _NUMERIC_ESCAPE.sub(evaluated, text[start:end]) + text[end:]
    return text


_RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # a tab, CR, ... written as itself (not a newline)


def _escaped_controls(text: str) -> str:
    """Control characters written raw inside "..." literals, as escapes: lark reads `"a<TAB>b"`, and both
    backends refused it ("lexer error", "invalid string literal")."""
    if not _RAW_CONTROL.search(text):
        return text
    try:
        spans = parse_lark(text).string_spans
    except ParseError:
        return text
    for start, end in sorted(spans, reverse=True):
        literal = _RAW_CONTROL.sub(lambda m: f"\\u{ord(m[0]):04x}", text[start:end])
        text = text[:start] + literal + text[end:]
    return text


def _exact_common(text: str) -> str:
    if "ESCAPED_STRING" not in text:
        return text
    text = _IMPORT_ONE.sub(lambda m: f"{m[2] or 'ESCAPED_STRING'}: {EXACT_ESCAPED_STRING}", text)

    def many(m: re.Match) -> str:
        names = [n.strip() for n in m[2].split(",") if n.strip()]
        if "ESCAPED_STRING" not in names:
            return m[0]
        rest = [n for n in names if n != "ESCAPED_STRING"]
        kept = f"{m[1]}%import common ({', '.join(rest)})\n" if rest else ""
        return f"{kept}ESCAPED_STRING: {EXACT_ESCAPED_STRING}"

    return _IMPORT_MANY.sub(many, text)
