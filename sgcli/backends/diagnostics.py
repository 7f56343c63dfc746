"""Turning backends' error and warning text into positioned, user-facing messages."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sgcli.constraints.jsonpos import locate, pointer_of
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import Location, UserError, offset_to_line_col

_LINE_COL = re.compile(r"line (\d+),? col(?:umn)? (\d+)", re.I)
_POSITION = re.compile(r"at position (\d+)", re.I)
# "[20:38:07] /project/cpp/x.cc:820: ", at the start of a line or after xgrammar's own words ("failed to compile
# regular expression: [02:12:54] /project/cpp/regex_converter.cc:94: Regex parsing error ...")
_LOG_PREFIX = re.compile(r"\[\d\d?:\d\d:\d\d\] \S+:\d+: ")
_WARNING_TAG = re.compile(r"^warning:\s*", re.I)  # "Warning: ", "WARNING: "


def native_message(line: str) -> str:
    """A native library's error or log line in its own words: without its log prefixes
    ("[20:38:07] /project/cpp/x.cc:820: ", wherever one stands) or a "Warning:" tag. The one place that
    scrapes them."""
    return _WARNING_TAG.sub("", _LOG_PREFIX.sub("", line.strip())).strip()


def grammar_error(backend: str, spec: ConstraintSpec, message: str, *, hint: str | None = None) -> UserError:
    """A compile error with file:line:col pulled out of the backend's own message."""
    text = native_message(message)
    line = col = None
    if spec.kind is Kind.REGEX:
        # "position N" counts (from 1) inside the regex; a "line, column" is of the grammar made from it
        m = _POSITION.search(text)
        if m:
            line, col = regex_place(spec.text, int(m.group(1)) - 1)
    elif spec.kind is not Kind.STRUCTURAL_TAG:  # a tag's positions are of the grammar the library made of it
        m = _LINE_COL.search(text)
        if m:
            line, col = int(m.group(1)), int(m.group(2))
    return UserError(
        f"{spec.kind.label} rejected by {backend}: {text}",
        location=spec.where(line, col),
        hint=hint or _default_hint(text, line),
    )


# llguidance: "unknown grammar @answer"; xgrammar: "unknown named grammar '@answer'"
_UNKNOWN_SUB = re.compile(r"unknown (?:named )?grammar '?@([A-Za-z_][A-Za-z0-9_]*)")


def _default_hint(message: str, line: int | None) -> str:
    """What to do about a compile error the backend gave no hint for."""
    sub = _UNKNOWN_SUB.search(message)
    if sub:  # a Lark `@name` with no sub-grammar given: the grammar is fine, the command lacks a flag
        return f"give the sub-grammar `@{sub.group(1)}` with --sub {sub.group(1)}=FILE (a JSON Schema, .lark or .gbnf)"
    return "fix the grammar at that position" if line else "fix the constraint"


def regex_place(text: str, offset: int) -> tuple[int, int]:
    """line:col in a regex file of a 0-based offset inside the regex (one past its end: its end)."""
    return offset_to_line_col(text, max(0, min(offset, len(text))))


def escaped_regex_offset(text: str, shown: int) -> int:
    """The offset in `text` of offset `shown` in llguidance's print of the regex, which spells a
    newline, return, tab or `/` outside an escape with two characters (`regex_to_lark`)."""
    at = i = 0
    while i < len(text) and at < shown:
        width = 2 if text[i] == "\\" and i + 1 < len(text) else 1
        at += 2 if width == 2 or text[i] in "\n\r\t/" else 1
        i += width
    return i


# llguidance: "at 2(9): message" or "2(9): message", then a code excerpt "   2 | ...\n      ^".
_LLG_POS = re.compile(r"^(?:at )?(\d+)\((\d+)\):\s*", re.S)
_EXCERPT = re.compile(r"\n\s+\d+ \| ")
# Rust regex errors: "regex parse error:\n    a(b\n     ^\nerror: unclosed group"
_REGEX_CARET = re.compile(r"regex parse error:\n( *)(.*)\n( *)\^+\nerror: ([^\n]*)")


@dataclass(frozen=True)
class Diagnosis:
    """A backend's error message boiled down: one readable line plus where, if it says."""

    message: str
    line: int | None = None
    col: int | None = None
    regex: str | None = None  # the regex a regex parse error was about
    regex_offset: int | None = None  # 0-based position of the caret inside that regex


def diagnose_llguidance(text: str) -> Diagnosis:
    text = text.split("<backtrace>")[0].strip()  # a panic's frames: 100 lines of addresses, none of them news
    if text.startswith("panic:"):  # an assertion inside llguidance, caught at its Python boundary
        text = f"llguidance panicked (its own bug, not a mistake in the input):{text.removeprefix('panic:')}"
    line = col = None
    m = _LLG_POS.match(text)
    if m:
        line, col = int(m.group(1)), int(m.group(2))
        text = text[m.end() :]
    excerpt = _EXCERPT.search(text)
    if excerpt:
        text = text[: excerpt.start()]
    regex = offset = None
    r = _REGEX_CARET.search(text)
    if r:
        regex, offset = r.group(2), len(r.group(3)) - len(r.group(1))
        text = (text[: r.start()] + r.group(4)).strip()
    text = text.split("\n<state>")[0].strip()
    if text == "NoExtensionBias":  # its matcher's name for a state where no token, nor the end, is allowed
        text = (
            "llguidance's grammar allows no next token and no end here (its NoExtensionBias): the constraint, as "
            "llguidance built it, holds no text past this point"
        )
    return Diagnosis(" ".join(text.split()), line, col, regex, offset)


def positioned_error(
    backend: str,
    spec: ConstraintSpec,
    message: str,
    *,
    line: int | None = None,
    col: int | None = None,
    origin: str | None = None,
    hint: str | None = None,
) -> UserError:
    """A compile error at a position the adapter worked out itself."""
    return UserError(
        f"{spec.kind.label} rejected by {backend}: {message}",
        location=Location(origin, line, col) if origin else spec.where(line, col),
        hint=hint or _default_hint(message, line),
    )


def schema_error(
    backend: str, spec: ConstraintSpec, message: str, paths: list[tuple], *, hint: str | None = None
) -> UserError:
    """A JSON Schema compile error placed at the first schema location it is about."""
    pos = locate(spec.text, paths[0]) if paths else None
    where = f" (at {pointer_of(paths[0]) or '/'})" if paths else ""
    line, col = pos or (None, None)
    return positioned_error(
        backend,
        spec,
        message + where,
        line=line,
        col=col,
        hint=hint or "change or remove that keyword, or try another --backend",
    )
