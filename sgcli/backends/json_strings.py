"""JSON string content, checked as a prefix token by token: what sgcli's schema checker reads strings with.

A string's rules (`StringRules`: maxLength, enum/const, anchored patterns) are checked on the content
written so far, so a token that would make them unreachable is refused before the string closes
(`string_dead`). `vocab_tables` precomputes, once per vocabulary, what each token adds to a string,
so most tokens are judged as numpy arrays rather than one by one.
"""

from __future__ import annotations

import functools
import json
import re
import weakref
from dataclasses import dataclass, field

from sgcli.constraints.formats import user_format_regex
from sgcli.constraints.regex_dialects import SCHEMA, compiled
from sgcli.tokenizers.vocab import Vocab

NUMBER_BYTES = frozenset(b"0123456789+-.eE")


@dataclass
class StringRules:
    """What a string value must meet, checkable on a prefix."""

    max_length: int | None = None
    choices: list[frozenset[str]] = field(default_factory=list)  # enum/const strings, one set per subschema
    patterns: list = field(default_factory=list)  # compiled `regex` patterns, anchored at the start
    ascii_closed: list[bool] = field(default_factory=list)  # per pattern: no non-ASCII character can match
    # `format: email` (or idn-email): a valid string holds an `@` and a character after it, which
    # `maxLength` must leave room for (xgrammar drops `maxLength` beside `format`: its grammar wrote 20
    # characters with no `@`, and the checker found out only past the bound)
    at_sign: bool = False


def add_string_rules(rules: StringRules, node: dict) -> None:
    """Add `node`'s prefix-checkable string keywords to `rules`."""
    if isinstance(node.get("maxLength"), int) and not isinstance(node["maxLength"], bool):
        rules.max_length = min(node["maxLength"], rules.max_length if rules.max_length is not None else 1 << 62)
    if isinstance(node.get("enum"), list):
        rules.choices.append(frozenset(v for v in node["enum"] if isinstance(v, str)))
    if isinstance(node.get("const"), str):
        rules.choices.append(frozenset({node["const"]}))
    if node.get("format") in ("email", "idn-email"):
        rules.at_sign = True
    for pattern, dialect in ((node.get("pattern"), SCHEMA), (user_format_regex(node.get("format")), None)):
        if isinstance(pattern, str) and pattern.startswith("^"):
            compiled = prefix_regex(pattern, dialect)
            if compiled is not None:
                rules.patterns.append(compiled)
                rules.ascii_closed.append(_ascii_closed(pattern))


_OPEN = re.compile(r"\.|\[\^|\\[wWsSdDpPXN]|\(\?[a-zA-Z]*[isux]")


def _ascii_closed(pattern: str) -> bool:
    """Whether no non-ASCII character can match anywhere in `pattern` (only ASCII literals and classes:
    no `.`, negated class, `\\w`-style class or flag that reaches beyond ASCII)."""
    return pattern.isascii() and _OPEN.search(pattern) is None


# a lookahead: `regex`'s partial matching reads the end of a prefix as the end of the text inside it, so
# `^(?!ab$)[a-z]+$` called "ab" a dead end though "abc" matches (generation could never write "abc")
_LOOKAHEAD = re.compile(r"(?<!\\)\(\?[=!]")


def prefix_regex(pattern: str, dialect: str | None):
    """`pattern` compiled for partial matching: a `pattern` as jsonschema's check reads it (`schema_patterns`),
    a `--format` REGEX (`dialect` None) as written; None where a prefix cannot be judged soundly (a
    lookahead), which leaves the check to the value's completion."""
    import regex

    if _LOOKAHEAD.search(pattern):
        return None
    try:
        return compiled(pattern, dialect) if dialect else regex.compile(pattern)
    except Exception:  # DialectError, or a pattern only `re` reads: no prefix check, the completion check stays
        return None


def at_need(content: str) -> int:
    """The fewest characters an email starting with `content` still needs: an `@` and one after it."""
    return 2 if "@" not in content else 1 if content.endswith("@") else 0


_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class VocabTables:
    has_quote: object  # numpy bool per id: holds a `"`
    ends_number: object  # numpy bool per id: holds a byte that cannot continue a number
    # per id, for a "plain" piece (no quote, backslash or control byte): the characters it adds to a string
    # whose content so far is whole (its UTF-8 decoded, an unfinished character at its end left out)
    plain_len: object  # numpy int: how many, an unfinished character at its end counted (-1: not plain)
    first: object  # numpy int: the code point of its first whole character (-1: none)
    plain_text: dict[int, str]  # id -> its whole characters
    plain_tail: dict[int, bytes]  # id -> the bytes of the unfinished character it ends with, where it does
    by_text: dict[str, list[int]]  # whole characters -> the ids of the pieces that are exactly them
    tail: object  # numpy int per id: 1 where a plain piece ends with an unfinished character
    at_sign: object  # numpy int per id: 1 where a plain piece's characters hold an `@`, 2 where they end with one


def vocab_tables(vocab: Vocab) -> VocabTables:
    found = _tables.get(vocab)
    if found is None:
        import numpy as np

        n = len(vocab)
        has_quote = np.zeros(n, dtype=bool)
        ends_number = np.zeros(n, dtype=bool)
        plain_len = np.full(n, -1, dtype=np.int64)
        first = np.full(n, -1, dtype=np.int64)
        plain_text, plain_tail, by_text = {}, {}, {}
        tails, at_sign = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for i, piece in enumerate(vocab.tokens):
            if i in vocab.special_ids:
                ends_number[i] = True
                continue
            has_quote[i] = 34 in piece
            ends_number[i] = any(b not in NUMBER_BYTES for b in piece)
            if piece and 34 not in piece and 92 not in piece and min(piece) >= 0x20:
                text, tail = string_state(piece)
                if tail + text.encode("utf-8") != piece and text.encode("utf-8") + tail != piece:
                    continue  # bytes no UTF-8 reader takes: judged one by one
                plain_len[i] = len(text) + (1 if tail else 0)  # an unfinished character counts as one
                plain_text[i] = text
                first[i] = ord(text[0]) if text else -1
                at_sign[i] = 2 if text.endswith("@") else 1 if "@" in text else 0
                if tail:
                    plain_tail[i] = tail
                    tails[i] = 1
                else:
                    by_text.setdefault(text, []).append(i)
        found = VocabTables(has_quote, ends_number, plain_len, first, plain_text, plain_tail, by_text, tails, at_sign)
        _tables[vocab] = found
    return found


def string_state(raw: bytes) -> tuple[str, bytes]:
    """(the characters of a JSON string's content so far, the unfinished escape or UTF-8 character at its
    end: b"" where there is none). Bytes no UTF-8 reader takes are left out (the grammar allows none)."""
    cut, i, n = len(raw), 0, len(raw)
    while i < n:
        if raw[i] == 92:
            need = 6 if raw[i + 1 : i + 2] == b"u" else 2
            if i + need > n:
                cut = i
                break
            i += need
        else:
            i += 1
    if cut == n:  # an unfinished character: a lead byte at most 3 bytes from the end, its sequence cut short
        for back in range(1, min(3, n) + 1):
            b = raw[n - back]
            if b >= 0xC0:
                if back < (2 if b < 0xE0 else 3 if b < 0xF0 else 4):
                    cut = n - back
                break
            if b < 0x80:
                break
    head, tail = raw[:cut], raw[cut:]
    try:
        return json.loads('"' + head.decode("utf-8", errors="ignore") + '"'), tail
    except ValueError:
        return "", tail


def string_dead(rules: StringRules, content: str, tail: bytes = b"") -> str | None:
    """Why a string that starts with `content` (then `tail`, the bytes of one unfinished escape or character)
    can never meet `rules`; None while it still can."""
    # one more character, unless an escape may be the low half of a surrogate pair the content ends with
    pending = 1 if tail and not (tail[:1] == b"\\" and content[-1:] and 0xD800 <= ord(content[-1]) < 0xDC00) else 0
    if rules.max_length is not None and len(content) + pending > rules.max_length:
        return f"longer than `maxLength` {rules.max_length}"
    if (
        rules.max_length is not None
        and rules.at_sign
        and len(content) + max(pending, at_need(content)) > rules.max_length
    ):
        return f"an email cannot end within `maxLength` {rules.max_length} (it needs an `@` and a domain after it)"
    for choices in rules.choices:
        if not any(goes_on(c, content, tail) for c in choices):
            return "not the start of any `enum`/`const` value"
    escaped = _escaped(tail) if tail[:1] == b"\\" else None
    for p, closed in zip(rules.patterns, rules.ascii_closed):
        if p.search(content, partial=True) is None:
            return f"can no longer match `pattern` {p.pattern!r}"
        if tail and pattern_blocked(p, closed, content, tail, escaped):
            return f"can no longer match `pattern` {p.pattern!r} (with the character being written)"
    return None


def pattern_blocked(p, closed: bool, content: str, tail: bytes, escaped) -> bool:
    """Whether no character the unfinished `tail` can still become lets `p` match on."""
    if tail[:1] != b"\\":
        if closed:  # a non-ASCII character, which a pattern of ASCII classes and literals never takes
            return True
        return _no_character_fits(p, content, tail)
    if isinstance(escaped, list):
        return all(p.search(content + ch, partial=True) is None for ch in escaped)
    if isinstance(escaped, tuple):
        return closed and escaped[0] >= 0x80
    return False


_FEW = 64  # the characters an unfinished UTF-8 sequence is tried with, one by one, at most


@functools.lru_cache(maxsize=4096)
def _no_character_fits(p, content: str, tail: bytes) -> bool:
    """Whether none of the characters the unfinished UTF-8 `tail` can become lets `p` match on, where
    they are few (a 2-byte lead, or all but the last byte of a longer one): `^\\d$` after "3" took the
    first byte of a digit only `re` reads as one, and outlines-core's generation backtracked out of
    that dead end until it gave up (15 outputs in 16). Many tokens share a tail: cached."""
    low, high = _utf8_range(tail)
    if high < low or high - low >= _FEW:
        return False  # not a UTF-8 start, or too many to try: the character may still fit
    return all(p.search(content + chr(c), partial=True) is None for c in range(low, high + 1))


def _utf8_range(tail: bytes) -> tuple[int, int]:
    """(lowest, highest) code point an unfinished UTF-8 sequence `tail` can still complete to."""
    lead = tail[0]
    size = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
    if not size or len(tail) >= size:
        return 1, 0
    bits = lead & (0x7F >> size)
    for b in tail[1:]:
        bits = bits << 6 | (b & 0x3F)
    missing = size - len(tail)
    low, high = bits << 6 * missing, (bits << 6 * missing) | ((1 << 6 * missing) - 1)
    low = max(low, (0x80, 0x800, 0x10000)[size - 2])  # no overlong forms
    high = min(high, 0x10FFFF)
    return low, high


def _escaped(tail: bytes):
    """What an unfinished escape can still produce: the characters (a list, when few), a (lowest, highest)
    code point range, or None (any character)."""
    if tail[:2] != b"\\u":
        return None
    digits = tail[2:].decode("ascii", errors="ignore")
    low, high = int(digits.ljust(4, "0"), 16), int(digits.ljust(4, "f"), 16)
    return [chr(c) for c in range(low, high + 1)] if high - low < 256 else (low, high)


def goes_on(choice: str, content: str, tail: bytes) -> bool:
    """Whether `choice` starts with `content` and then, where a character is unfinished, with its bytes."""
    if not choice.startswith(content):
        return False
    if not tail:
        return True
    rest = choice[len(content) :]
    if tail[:1] != b"\\":
        return rest.encode("utf-8").startswith(tail)
    if not rest:
        return False
    escaped = _escaped(tail)
    if isinstance(escaped, list):
        return rest[0] in escaped
    return escaped is None or escaped[0] <= ord(rest[0]) <= escaped[1]
