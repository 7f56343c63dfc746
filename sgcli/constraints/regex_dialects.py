"""Does a text match a regex *in the dialect the backend read it in*?

Backends do not share one regex dialect: llguidance and outlines-core read Rust's `regex`
syntax (`\\d`, `\\w` are Unicode, `\\z` ends the text), xgrammar reads ECMAScript's (JSON
Schema `pattern`: `\\d` is [0-9], `\\w` is [A-Za-z0-9_]). Python's `re` is neither, so the
check uses the `regex` package (Unicode classes, `\\p{..}`, possessive quantifiers) after a
small translation of the few escapes whose meaning differs. `.` never matches a newline in
either dialect, so neither does it here (nor, in ECMAScript's, a return or U+2028/U+2029).

A third reading, `SCHEMA`, is a JSON Schema `pattern` that Python's `re` (jsonschema's reader) cannot read,
in the ECMA-262 syntax JSON Schema names and `re` lacks: `\\p{L}`, `(?<name>...)`, `\\u{1F600}`, `\\cJ`
(`schema_patterns`); the `regex` package's escapes otherwise, as `re`'s.
"""

from __future__ import annotations

import re
from functools import lru_cache

RUST, ECMA, SCHEMA = "rust", "ecma", "schema"
ECMA_DOT = r"[^\n\r\u2028\u2029]"  # ECMAScript's `.`: every line terminator out (Rust's: \n only)

# ECMAScript's `\s`: WhiteSpace and LineTerminator (U+FEFF in, U+0085 out: not Unicode's White_Space)
_ECMA_SPACE = r"\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# Escapes whose meaning differs from the `regex` package's, per dialect: outside / inside [...]
_ECMA_OUTSIDE = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[A-Za-z0-9_]",
    "W": "[^A-Za-z0-9_]",
    "s": f"[{_ECMA_SPACE}]",
    "S": f"[^{_ECMA_SPACE}]",
}
_ECMA_INSIDE = {"d": "0-9", "w": "A-Za-z0-9_", "s": _ECMA_SPACE}
_RUST_OUTSIDE = {"z": r"\Z"}
# Rust nests classes, has set operations (`&&`, `--`, `~~`) and scoped inline flags, as the regex
# package's VERSION1; its case folding is simple, so VERSION1's full folding (`ß` = `SS`) is off
RUST_FLAGS = "(?V1)(?-f)"
_HEX = frozenset("0123456789abcdefABCDEF")


MATCH_TIMEOUT_S = 5.0


class DialectError(Exception):
    """The pattern cannot be read in this dialect by the `regex` package."""


class TooDeep(DialectError):
    """The pattern nests deeper than the `regex` package can compile (a valid regex all the same)."""


def translate(pattern: str, dialect: str) -> str:
    """`pattern` rewritten so that the `regex` package gives it the dialect's meaning."""
    outside = _ECMA_OUTSIDE if dialect == ECMA else _RUST_OUTSIDE if dialect == RUST else {}
    inside = _ECMA_INSIDE if dialect == ECMA else {}
    out: list[str] = []
    i, in_class, depth = 0, False, 0  # depth: Rust's classes nested inside the outermost
    last = None  # outside a class: "quant" after a quantifier, "lazy" after its `?`, "count" after `{m,n}`
    if dialect == RUST and _CRLF_FLAG.search(pattern):
        raise DialectError("the CRLF flag `R`, which the regex package reads as recursion")
    if dialect == RUST:
        pattern = without_verbose(pattern)
    # Rust's and ECMAScript's `$` is the end of the text; Python's also before a last "\n" (`a$` took "a\n")
    # (a JSON Schema `pattern` too: ECMA-262's, which the SCHEMA reading keeps apart from `re`'s `$`)
    end_anchor = r"\Z" if not _MULTILINE_FLAG.search(pattern) else "$"
    while i < len(pattern):
        ch = pattern[i]
        if dialect == RUST and not in_class and ch in "*+?" and last is not None:
            last = _stacked(out, ch, last)
            i += 1
            continue
        last = "quant" if ch in "*+?" and not in_class else "count" if ch == "}" and not in_class else None
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            braced = _braced_codepoint(pattern, i, dialect)
            if braced is not None:  # `\u{3b1}`: unknown to the regex package, which reads `\U000003b1`
                out.append(f"\\U{braced[0]:08x}")
                i = braced[1]
                continue
            table = inside if in_class else outside
            if dialect != RUST and nxt == "c" and pattern[i + 2 : i + 3].isascii() and pattern[i + 2 : i + 3].isalpha():
                out.append(f"\\x{ord(pattern[i + 2]) % 32:02x}")  # `\cJ`, a control character, unknown to `regex`
                i += 3
                continue
            if nxt in table:
                out.append(table[nxt])
            elif in_class and dialect == ECMA and nxt in "DWS":
                raise DialectError(f"\\{nxt} inside a character class has no ASCII translation")
            elif nxt in "pP" and pattern[i + 2 : i + 3] == "{" and (end := pattern.find("}", i + 3)) > 0:
                out.append(pattern[i : end + 1])  # `\p{Lu}` whole: its `}` closes no count
                i = end + 1
                continue
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[" and in_class and dialect != RUST:  # a literal: `[[:upper:]]` is no POSIX class there
            out.append("\\[")
            i += 1
            continue
        if ch == "[" and in_class and dialect == RUST:
            if pattern.startswith("[:", i) and (end := pattern.find(":]", i + 2)) > 0:  # [[:alpha:]]
                out.append(pattern[i : end + 2])
                i = end + 2
                continue
            depth += 1  # Rust nests classes (`[[a-c]x]`), as the regex package's VERSION1 does
            out.append(ch)
            i += 1
            continue
        if ch == "]" and depth:
            depth -= 1
            out.append(ch)
            i += 1
            continue
        if ch == "|" and in_class and dialect == RUST:  # a literal in Rust; VERSION1 reads `||` as union
            out.append("\\|")
            i += 1
            continue
        if ch == "[" and not in_class:
            in_class = True
            out.append(ch)
            # a leading ']' or '^]' is a literal, not the end of the class
            j = i + 1
            if pattern[j : j + 1] == "^":
                out.append("^")
                j += 1
            if pattern[j : j + 1] == "]":
                out.append("\\]")
                j += 1
            i = j
            continue
        if ch == "]" and in_class:
            in_class = False
        if ch == "$" and not in_class:
            out.append(end_anchor)
        else:
            out.append(ECMA_DOT if ch == "." and not in_class and dialect == ECMA else ch)
        i += 1
    return "".join(out)


def end_of_text(pattern: str) -> str:
    """`pattern` for Python's `re` with each `$` outside a class read as ECMA-262 and Rust read it, the end
    of the text (Python's `$` also matches before a last newline: `^[a-z]+$` found "abc\n"), unless a
    multiline flag asks for line ends. Nothing else changes."""
    if "$" not in pattern or _MULTILINE_FLAG.search(pattern):
        return pattern
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class, j = True, i + 1
            j += pattern[j : j + 1] == "^"
            j += pattern[j : j + 1] == "]"  # a leading `]` is a literal
            out.append(pattern[i:j])
            i = j
            continue
        if ch == "]" and in_class:
            in_class = False
        out.append(r"(?:\Z)" if ch == "$" and not in_class else ch)  # grouped: `$?` is a valid pattern
        i += 1
    return "".join(out)


_CRLF_FLAG = re.compile(r"\(\?[a-zA-Z-]*R[a-zA-Z-]*[:)]")
_VERBOSE_FLAG = re.compile(r"\(\?[a-zA-Z]*x")  # `(?x)`, `(?ix:`: verbose mode turned on somewhere
_MULTILINE_FLAG = re.compile(r"\(\?[a-zA-Z]*m")
_FLAGS = re.compile(r"\(\?([a-zA-Z-]*)([:)])")


def without_verbose(pattern: str) -> str:
    """`pattern` (Rust's syntax) with what its verbose mode (`x`) ignores left out: whitespace and `#`
    comments to the end of the line, inside classes too (Rust reads `(?x)[ a]` as `[a]`), where the
    flag is on (`(?x)` to the end of its group, `(?x:...)` within it, `(?-x)` off). An escaped space
    becomes `\\x20`, the same character without the flag. Readers that get the whitespace wrong then
    have none to read: llguidance's regex-to-Lark step wrote a raw line break as `\\n`, which verbose
    mode keeps (`(?x)a\n|b` took only "a\n"), and Python's verbose mode keeps whitespace and `#` in a class."""
    if not _VERBOSE_FLAG.search(pattern):
        return pattern
    out: list[str] = []
    stack: list[bool] = []  # the flag outside each open group
    verbose, depth, i = False, 0, 0  # depth: character classes open (Rust nests them)
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(
                f"\\x{ord(nxt):02x}"
                if nxt.isspace() and ord(nxt) < 0x100
                else f"\\u{ord(nxt):04x}"
                if nxt.isspace()
                else pattern[i : i + 2]
            )
            i += 2
        elif verbose and ch.isspace():
            i += 1
        elif verbose and ch == "#":
            end = pattern.find("\n", i)
            i = len(pattern) if end < 0 else end + 1
        elif ch == "[":
            if depth and pattern.startswith("[:", i) and (end := pattern.find(":]", i + 2)) > 0:
                out.append(pattern[i : end + 2])  # [[:alpha:]]
                i = end + 2
                continue
            depth += 1
            out.append(ch)
            i += 1
            if depth == 1:  # a leading `]` (or `^]`) is a literal
                lead = re.match(r"\^?\]?", pattern[i:]).group()
                out.append(lead)
                i += len(lead)
        elif ch == "]" and depth:
            depth -= 1
            out.append(ch)
            i += 1
        elif depth:
            out.append(ch)
            i += 1
        elif ch == "(":
            m = _FLAGS.match(pattern, i)
            turned = verbose
            if m:
                on, _, off = m.group(1).partition("-")
                turned = (verbose or "x" in on) and "x" not in off
            if m and m.group(2) == ")":
                verbose = turned  # to the end of the enclosing group
            else:
                stack.append(verbose)
                verbose = turned
            out.append(m.group() if m else ch)
            i = m.end() if m else i + 1
        elif ch == ")":
            verbose = stack.pop() if stack else verbose
            out.append(ch)
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _stacked(out: list[str], ch: str, last: str) -> str:
    """Rust reads a quantifier after a quantifier as the repetition of the repeated (`a*+` is `(a*)+`), the
    regex package as possessive: `a*+a` refused "a", which llguidance wrote. As languages, `(X*)+`,
    `(X?)+`, `(X+)*`, ... are `X*`, and `(X+)+` is `X+`: the pair becomes one. A `?` after a quantifier
    is its laziness, which changes no language. Returns the new state."""
    if last == "count":
        if ch == "?":
            out.append(ch)
            return "lazy"
        raise DialectError("a repetition of a counted repetition (`{m,n}*`), which the regex package reads otherwise")
    if ch == "?":
        if last == "lazy":
            raise DialectError("a quantifier after a lazy one, which the regex package reads otherwise")
        out.append(ch)
        return "lazy"
    if last == "lazy":
        out.pop()  # laziness changes no language
    out[-1] = "*" if ch == "*" or out[-1] in "*?" else "+"
    return "quant"


def _braced_codepoint(pattern: str, i: int, dialect: str) -> tuple[int, int] | None:
    """(code point, index past it) for the escape at `i` when it is braced hex: Rust's `\\x{..}`,
    `\\u{..}`, `\\U{..}`, ECMAScript's `\\u{..}`; None for any other escape."""
    letters = "xuU" if dialect == RUST else "u"
    if pattern[i + 1] not in letters or pattern[i + 2 : i + 3] != "{":
        return None
    end = pattern.find("}", i + 3)
    digits = pattern[i + 3 : end] if end > 0 else ""
    code = int(digits, 16) if 0 < len(digits) <= 8 and all(c in _HEX for c in digits) else -1
    if not 0 <= code <= 0x10FFFF:
        raise DialectError(f"invalid escape {pattern[i : end + 1 if end > 0 else len(pattern)]!r} at position {i}")
    return code, end + 1


@lru_cache(maxsize=64)
def compiled(pattern: str, dialect: str):
    import regex

    try:
        if dialect != RUST:  # `[[a-c]x]` is `[[a-c]` then `x]`, as ECMAScript (xgrammar) and Python read it
            return regex.compile(translate(pattern, dialect), flags=regex.VERSION0)
        return regex.compile(RUST_FLAGS + translate(pattern, dialect))
    except regex.error as exc:
        raise DialectError(str(exc)) from None
    except RecursionError:  # no verdict from a pattern it cannot hold
        raise TooDeep("the regex package cannot compile it (RecursionError)") from None
    except (OverflowError, MemoryError) as exc:
        raise DialectError(f"the regex package cannot compile it ({type(exc).__name__})") from None


def search(pattern: str, text: str, dialect: str) -> bool:
    """Whether `pattern` is found anywhere in `text`; raises DialectError as `fullmatch` does."""
    return bounded_match(compiled(pattern, dialect).search, text)


def fullmatch(pattern: str, text: str, dialect: str = RUST) -> bool:
    """Whether all of `text` matches `pattern`; raises DialectError when the pattern cannot be
    read, or when matching backtracks past MATCH_TIMEOUT_S (a hostile pattern is no verdict)."""
    return bounded_match(compiled(pattern, dialect).fullmatch, text)


def bounded_match(match, text: str) -> bool:
    try:
        return match(text, timeout=MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        raise DialectError(f"matching took longer than {MATCH_TIMEOUT_S} s") from None
    except (RecursionError, MemoryError) as exc:
        raise DialectError(f"the regex package cannot match it ({type(exc).__name__})") from None
