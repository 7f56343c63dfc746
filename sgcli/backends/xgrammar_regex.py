"""Constraints spelled so that xgrammar's readers give them the meaning they have for everyone else.

Found by running real-world regexes (2,136 JSON Schema `pattern`s as `--regex`), GBNF and Lark shapes
through xgrammar 0.2 and checking its random walks independently (benchmarks/regex_readings.py):
- regexes (`--regex`, Lark's `/.../` terminals, structural tags' `regex`): `\\xHH` took every hex
  digit after it (`\\x41B` was U+041B); a class opening with an escaped caret was negated (`[\\^~]`
  was `[^~]`); `.` took line terminators (`--regex` only); a Lark terminal's `\\s` was ECMAScript's,
  not the lark check's. Respelled: `\\u00HH`, the caret moved, `.` and `\\s` as the sets meant.
- GBNF: empty alternatives, `.`, `{,n}` and a repeated repetition, all of which llama.cpp reads, were
  refused. Respelled: `""`, `[^]`, `{0,n}`, parentheses (`gbnf_for_xgrammar`).
- What no spelling fixes is refused at its place (`misread`): `\\A`/`\\Z`/`\\z` (letters to it, anchors
  to the check), `\\p{..}` in a class, an anchor text can pass, a quantified anchor.
Only the rewritten pieces change, so xgrammar's error positions still point into what the user wrote.
(Its JSON Schema path reads patterns right; `pattern_gaps` handles what it does not.)
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

from sgcli.constraints.regex_dialects import ECMA, ECMA_DOT, RUST
from sgcli.dialects.gbnf import parse_gbnf
from sgcli.dialects.grammar_model import MAX_CODE_POINT, Alt, Chars, Lit, Opaque, ParseError, Rep, Seq, walk
from sgcli.dialects.lark import parse_lark
from sgcli.dialects.regex_parse import class_escape, octal_escape, parse_regex
from sgcli.lone_surrogates import half_pair

# the class escapes a Lark terminal means otherwise than xgrammar reads them (`lark_class`)
_LARK_ESCAPES = ("\\s", "\\S", "\\d", "\\D", "\\w", "\\W")
# one member of a class: an escape (\u{...}, \uHHHH, \xHH, \cX, \ and one character) or one character
_ATOM = re.compile(r"\\u\{[0-9A-Fa-f]+\}|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|\\c[A-Za-z]|\\.|[^\\]", re.S)
_CARET = re.compile(r"\\\^|\\x5[eE]|\\u005[eE]|\\u\{0*5[eE]\}")
_HEX2 = re.compile(r"\\x([0-9A-Fa-f]{2})")
# a backslash and what it escapes, left to right; `\xHH` caught where a hex digit follows it
_ESCAPE = re.compile(r"\\(?:x([0-9A-Fa-f]{2})(?=[0-9A-Fa-f])|[\s\S])")
_SURROGATE = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|\{0*[dD][89a-fA-F][0-9a-fA-F]{2}\})")
_ANY_ESCAPE = re.compile(r"\\(?:x([0-9A-Fa-f]{2})|[\s\S])")


def _needs_rewrite(pattern: str, *, lark: bool) -> bool:
    """A cheap look before the rewrite: most regexes hold none of these."""
    if "\\x" in pattern or "[\\" in pattern or "\\s" in pattern:
        return True
    return any(e in pattern for e in _LARK_ESCAPES) if lark else "." in pattern


@cache
def lark_class(escape: str) -> str:
    """The members of a class for `\\s`, `\\d`, `\\w` as the lark check reads them (the `regex` package:
    Unicode's, as Rust's and so llguidance's; `\\w` 817 ranges), `\\S`, `\\D`, `\\W` their complements.
    xgrammar's are ECMAScript's: ASCII digits and word characters, where `٣` and `é` are a Lark `\\d`, `\\w`."""
    ranges = list(class_escape(escape[1], RUST))
    if escape[1].isupper():
        ranges = _complement(ranges)
    return "".join(_code(lo) + ("-" + _code(hi) if hi > lo else "") for lo, hi in ranges)


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The code points outside `ranges`, less the surrogates (no UTF-8 text holds one)."""
    out, at = [], 0
    for lo, hi in sorted(ranges):
        if lo > at:
            out.append((at, lo - 1))
        at = max(at, hi + 1)
    if at <= MAX_CODE_POINT:
        out.append((at, MAX_CODE_POINT))
    split = []
    for lo, hi in out:  # cut U+D800-U+DFFF out
        if hi < 0xD800 or lo > 0xDFFF:
            split.append((lo, hi))
            continue
        if lo < 0xD800:
            split.append((lo, 0xD7FF))
        if hi > 0xDFFF:
            split.append((0xE000, hi))
    return split


def _code(cp: int) -> str:
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\u{{{cp:x}}}"


def for_xgrammar(pattern: str, *, lark: bool = False) -> str:
    """`pattern` in a spelling xgrammar reads with the meaning it has for its dialect: ECMAScript's (a
    `--regex`), or the lark check's (`lark`: a Lark terminal, which keeps its `.`, and whose `\\s` is
    Unicode's: xgrammar's took U+FEFF, which the lark check refuses). Unbalanced text is left for xgrammar to report."""
    if not _needs_rewrite(pattern, lark=lark):
        return pattern
    return "".join(piece for _, piece in _pieces(pattern, lark))


def original_offset(pattern: str, offset: int, *, lark: bool = False) -> int:
    """Where offset `offset` of `for_xgrammar(pattern)` comes from in `pattern` (a rewritten piece:
    its start), for xgrammar's "position N" in an error."""
    if not _needs_rewrite(pattern, lark=lark):
        return offset
    at = 0
    for start, piece in _pieces(pattern, lark):
        if offset < at + len(piece):
            return start + (offset - at if piece == pattern[start : start + len(piece)] else 0)
        at += len(piece)
    return len(pattern) + offset - at


def _pieces(pattern: str, lark: bool):
    """(offset in `pattern`, its rewritten text), piece by piece."""
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            m = _ESCAPE.match(pattern, i)  # None: a backslash that ends the pattern
            piece = pattern[i:] if m is None else "\\u00" + m[1] if m[1] else m[0]
            if piece == "\\s":
                piece = _space(lark)
            elif lark and piece in _LARK_ESCAPES:
                piece = "[" + lark_class(piece) + "]"
            yield i, piece
            i = m.end() if m is not None else n
            continue
        if ch == "[":
            end = _class_end(pattern, i)
            if end is None:
                yield i, pattern[i:]
                return
            yield i, _class(pattern[i + 1 : end], lark)
            i = end + 1
            continue
        yield i, (ECMA_DOT if ch == "." and not lark else ch)
        i += 1


# ECMAScript's `\\s` less U+2028/U+2029, which `_space` adds as alternatives
_ECMA_SPACE = "\\t-\\r \\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000\\ufeff"
_SEPARATORS = "\\u2028-\\u2029"  # as `lark_class` spells them


def _space(lark: bool) -> str:
    """`\\s` (ECMAScript's, or `lark`: the lark check's) with U+2028/U+2029 outside the class: in a
    class beside ASCII, xgrammar 0.2.9's mask let `(`/`)` through after a word (`_(` in `\\w+\\s\\d+`),
    which its matcher then refused, ending generation in an error."""
    members = lark_class("\\s").replace(_SEPARATORS, "") if lark else _ECMA_SPACE
    return "(?:[" + members + "]|\\u2028|\\u2029)"


def _class_end(pattern: str, start: int) -> int | None:
    """Index of the `]` closing the class opened at `start` (ECMAScript: the first unescaped one)."""
    k = start + 1
    while k < len(pattern):
        if pattern[k] == "\\":
            k += 2
        elif pattern[k] == "]":
            return k
        else:
            k += 1
    return None


def _members(body: str, lark: bool = False) -> list[str]:
    """The class body as members, a range (`a-z`) one member; `lark`: `\\s` as the lark check's."""
    atoms = [_HEX2.sub(r"\\u00\1", m.group()) for m in _ATOM.finditer(body)]
    atoms = [lark_class(a) if lark and a in _LARK_ESCAPES else a for a in atoms]
    members: list[str] = []
    k = 0
    while k < len(atoms):
        if k + 2 < len(atoms) and atoms[k + 1] == "-":
            members.append("".join(atoms[k : k + 3]))
            k += 3
        else:
            members.append(atoms[k])
            k += 1
    return members


def _class(body: str, lark: bool = False) -> str:
    if body.startswith("^"):
        return "[^" + "".join(_members(body[1:], lark)) + "]"
    members = _members(body, lark)
    if members and _CARET.match(members[0]):
        plain = next((k for k, m in enumerate(members) if not _CARET.match(m)), None)
        if plain is not None:
            members.insert(0, members.pop(plain))
        else:  # only carets and ranges from one: a range's end is in the class, and not a caret
            ends = [m[m.index("-", 2) + 1 :] for m in members if len(m) > 2 and "-" in m[2:]]
            if not ends:
                return r"\^"
            members.insert(0, ends[0])
    return "[" + "".join(members) + "]"


def escapes_for_xgrammar(text: str, *, every: bool = False) -> str:
    """A GBNF or Lark grammar with each `\\xHH` that a hex digit follows spelled `\\u00HH` (in strings,
    classes and regexes alike: llama.cpp, Python and ECMAScript all read two digits after `\\x`);
    `every` `\\xHH` (Lark: xgrammar refuses `\\x` in a string literal, and reads `\\u` there)."""
    if "\\x" not in text:
        return text
    return (_ANY_ESCAPE if every else _ESCAPE).sub(lambda m: "\\u00" + m[1] if m[1] else m[0], text)


# cheap looks before reading a GBNF grammar (most need no respelling): an empty alternative (a separator
# `::=`, `|`, `(` followed, past blanks and comments, by another, the end, or the next rule's name); and,
# with strings, classes and comments blanked, a `.`, a `{,n}`, or a repetition operator after another
_MAYBE_EMPTY = re.compile(r"(?:::=|[|(])(?:\s|#[^\n]*)*(?:[|)]|$|[A-Za-z0-9_.-]+\s*::=)")
_LEXEMES = re.compile(r'"(?:[^"\\\n]|\\.)*"|\[(?:[^\]\\\n]|\\.)*\]|#[^\n]*')
_MAYBE_RESPELT = re.compile(r"\.|\{\s*,|(?:[*+?]|\})\s*[*+?{]")


def gbnf_for_xgrammar(text: str) -> str:
    """A GBNF grammar as xgrammar reads it with llama.cpp's meaning: `escapes_for_xgrammar`, and what
    llama.cpp reads and xgrammar refuses, respelled: `""` in each empty alternative (llama.cpp's own
    json.gbnf: `ws ::= | " " | ...`; "Expect element"), `[^]` for `.` (any character; "Rule . is not
    defined"), `{0,n}` for `{,n}`, and parentheses around a repetition that another repeats
    (`[a-z]{2,3}?`). Placed by sgcli's GBNF reader; left as it was where that cannot read it."""
    text = escapes_for_xgrammar(text)
    if not (_MAYBE_EMPTY.search(text) or _MAYBE_RESPELT.search(_LEXEMES.sub(" ", text))):
        return text
    try:
        grammar = parse_gbnf(text)
    except ParseError:
        return text
    edits = [(at, 0, ' ""') for at in grammar.empty_alternatives]  # (offset, characters replaced, text)
    for rule in grammar.rules:
        for node in walk(rule.body):
            if isinstance(node, Chars) and text[node.pos] == ".":
                edits.append((node.pos, 1, "[^]"))
            elif isinstance(node, Rep):
                brace = re.match(r"\{\s*,", text[node.op_pos :])
                if brace:
                    edits.append((node.op_pos + 1, brace.end() - 2, "0"))
                if isinstance(node.body, Rep):
                    edits += [(node.body.end, 0, ")"), (node.body.pos, 0, "(")]
    for at, replaced, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):  # at one place: replace first
        text = text[:at] + new + text[at + replaced :]
    return text


def lark_for_xgrammar(text: str) -> str:
    """A Lark grammar with each `/.../` terminal rewritten (`for_xgrammar`, `.` kept); as it was where
    sgcli's reader cannot read it (xgrammar then says what is wrong)."""
    text = escapes_for_xgrammar(text, every=True)
    if "[\\" not in text and not any(e in text for e in _LARK_ESCAPES):
        return text
    out, at = [], 0
    for start, end in lark_regex_spans(text):
        out += [text[at:start], for_xgrammar(text[start:end], lark=True)]
        at = end
    return "".join(out) + text[at:]


@lru_cache(maxsize=16)
def lark_regex_spans(text: str) -> tuple[tuple[int, int], ...]:
    """Where the body of each `/.../` terminal of a Lark grammar is; none where sgcli cannot read it.
    (Cached: the compile both checks these regexes and respells them.)"""
    try:
        return tuple(parse_lark(text).regex_spans)
    except ParseError:
        return ()


def tag_regexes(fmt) -> list[str]:
    """The pattern of each `regex` content in a structural tag's format tree."""
    if isinstance(fmt, list):
        return [p for f in fmt for p in tag_regexes(f)]
    if not isinstance(fmt, dict):
        return []
    own = [fmt["pattern"]] if fmt.get("type") == "regex" and isinstance(fmt.get("pattern"), str) else []
    return own + [p for v in fmt.values() if isinstance(v, (dict, list)) for p in tag_regexes(v)]


def tag_for_xgrammar(fmt):
    """A structural tag's format tree with each `regex` content rewritten (`for_xgrammar`: its
    structural tags read regexes as `--regex` does) and each `grammar` content's escapes."""
    if isinstance(fmt, list):
        return [tag_for_xgrammar(f) for f in fmt]
    if not isinstance(fmt, dict):
        return fmt
    out = {k: tag_for_xgrammar(v) if isinstance(v, (dict, list)) else v for k, v in fmt.items()}
    if out.get("type") == "regex" and isinstance(out.get("pattern"), str):
        out["pattern"] = for_xgrammar(out["pattern"])
    if out.get("type") == "grammar" and isinstance(out.get("grammar"), str):
        out["grammar"] = escapes_for_xgrammar(out["grammar"])
    return out


def misread(pattern: str) -> tuple[int, str, str] | None:
    """(offset, what, hint) of the first piece of `pattern` that xgrammar reads as something else and no
    spelling fixes, so it must refuse it: `\\A`, `\\Z`, `\\z` (letters to it, anchors to the lark check
    and llguidance: cfn-lint's `^(vpc-)([a-z0-9]+)\\Z` took `vpc-exchangeZ`), `\\p{..}` inside a class
    (read as the letters; outside one xgrammar refuses it itself), or an anchor that text can precede
    (`^`) or follow (`$`), which ECMAScript (and llguidance) reads as matching nothing there and xgrammar
    skips (`a\\s*^b` took `ab`)."""
    for m in re.finditer(r"\\.|\[", pattern, re.S):
        written = octal_escape(pattern, m.start(), ECMA) if m.group() != "[" else None
        if written:
            what = (
                f"`{written}`, a backreference or an octal escape to Python's re, which xgrammar reads otherwise "
                "(with a warning) where ECMAScript refuses it"
            )
            return m.start(), what, "write the character as \\xHH"
        if m.group() == "[" and pattern[m.end() :].startswith(("]", "^]")):
            what = (
                "a class opening with `]`, which xgrammar reads as ECMAScript does (`[]` matches nothing, `[^]` "
                "any character) and Python and Rust as a literal ]"
            )
            return m.start(), what, "escape it: \\]"
        half = _SURROGATE.match(pattern, m.start()) if m.group() == "\\u" else None
        if half:
            what = f"{half_pair(f'`{half.group()}`')}: xgrammar writes its three bytes"
            return m.start(), what, "write the character itself, or its code point (\\u{1F600} for 😀)"
        if m.group() in ("\\A", "\\Z", "\\z"):
            letter = m.group()[1]
            what = f"`{m.group()}`, which xgrammar reads as the letter {letter} (as ECMAScript does); Python anchors"
            return m.start(), what, "write `^` or `$` for an anchor, or the letter alone"
        if m.group() == "[":
            end = _class_end(pattern, m.start())
            body = pattern[m.start() + 1 : end] if end is not None else ""
            for atom in _ATOM.finditer(body):
                if atom.group() in ("\\p", "\\P"):
                    at = m.start() + 1 + atom.start()
                    what = f"`{atom.group()}{{..}}` in a character class, which xgrammar reads as letters"
                    return at, what, "llguidance reads Unicode property classes (--backend llguidance)"
    if "^" in pattern or "$" in pattern:
        try:
            node = parse_regex(pattern).node
        except ParseError as exc:  # `a^+`: ECMAScript refuses it, xgrammar took `aaaa`
            if "nothing to repeat" in exc.message:
                return exc.pos, f"{exc.message} (ECMAScript refuses it; xgrammar reads something else)", "remove it"
            inner = _inner_anchor(pattern)  # unread, so judged by where it stands
            if inner is None:
                return None
            what = f"`{pattern[inner]}` inside a regex sgcli cannot read to check it ({exc.message}); xgrammar skips it"
            return inner, what, "drop the anchor, or escape it for the character itself"
        found: list[int] = []
        _stray(node, "^", False, found)
        _stray(node, "$", False, found)
        if found:
            at = min(found)
            where = "before" if pattern[at] == "^" else "after"
            what = f"`{pattern[at]}` where text can come {where} it: nothing matches through it, but xgrammar skips it"
            return at, what, f"drop the anchor, or escape it (\\{pattern[at]}) for the character itself"
    return None


def _inner_anchor(pattern: str) -> int | None:
    """Offset of the first `^` past the very start or `$` before the very end, outside escapes and classes."""
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            end = _class_end(pattern, i)
            i = len(pattern) if end is None else end + 1
            continue
        if (ch == "^" and i > 0) or (ch == "$" and i < len(pattern) - 1):
            return i
        i += 1
    return None


def _consumes(node) -> bool:
    """Whether `node` can match a non-empty string (anchors and lookarounds cannot)."""
    if isinstance(node, Lit):
        return node.text != ""
    if isinstance(node, (Seq, Alt)):
        return any(_consumes(n) for n in (node.items if isinstance(node, Seq) else node.alts))
    if isinstance(node, Rep):
        return node.max != 0 and _consumes(node.body)
    if isinstance(node, Opaque):
        return not (node.what.startswith("anchor") or "look" in node.what)
    return True


def _stray(node, anchor: str, beside: bool, found: list[int]) -> None:
    """Offsets of `anchor`s that text can precede (`^`) or follow (`$`); `beside`: text can already."""
    if isinstance(node, Opaque) and node.what == f"anchor {anchor}":
        if beside:
            found.append(node.pos)
    elif isinstance(node, Seq):
        items = node.items if anchor == "^" else node.items[::-1]
        for item in items:
            _stray(item, anchor, beside, found)
            beside = beside or _consumes(item)
    elif isinstance(node, Alt):
        for alt in node.alts:
            _stray(alt, anchor, beside, found)
    elif isinstance(node, Rep):
        again = (node.max is None or node.max > 1) and _consumes(node.body)
        _stray(node.body, anchor, beside or again, found)
