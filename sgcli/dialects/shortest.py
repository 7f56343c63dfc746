"""Shortest sentences of a grammar, and the fewest tokens that spell a string (rule L001).

The shortest sentence comes from the grammar's structure: a fixpoint over the rules,
each rule's shortest string built from its parts (a character class contributes one
character of its own, `x{n,}` contributes n copies of x's shortest string). Opaque
parts (`%json`, `@sub`, special tokens) make it unknown rather than guessed.
The token count is exact for that string: dynamic programming over the vocabulary
finds the fewest ordinary tokens whose bytes concatenate to it.
"""

from __future__ import annotations

import weakref

from sgcli.constraints.regex_dialects import DialectError
from sgcli.constraints.schema_patterns import finds
from sgcli.dialects.grammar_model import Alt, Chars, Lit, Node, Opaque, ParseError, Ref, Rep, Seq, rule_fixpoint
from sgcli.dialects.regex_parse import parse_regex

_READABLE = "a0 ._-!bcdefghijklmnopqrstuvwxyz123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def pick_char(node: Chars, variant: int = 0) -> str | None:
    """A character of the set: a readable one where possible; the `variant`-th for variety."""
    readable = [c for c in _READABLE if node.contains(ord(c))]
    if readable:
        return readable[variant % len(readable)]
    members = node.members(limit=10_000)
    if members:
        return chr(members[variant % len(members)])
    return next((chr(cp) for cp in range(32, 0x3000) if node.contains(cp)), None)


class ShortestStrings:
    """Shortest string of every rule of a grammar (None: none known)."""

    def __init__(self, defs: dict, external: set[str] = frozenset(), *, boost: int = 0, variant: int = 0):
        self.defs = defs
        self.external = external
        self.boost = boost  # extra iterations for every repetition that allows them
        self.variant = variant
        self.rules: dict[str, str | None] = rule_fixpoint(
            list(defs), lambda name, read: self._of(defs[name].body, read), None, _shorter
        )

    def of(self, node: Node) -> str | None:
        return self._of(node, self.rules.get)

    def _of(self, node: Node, read) -> str | None:
        if isinstance(node, Lit):
            return node.text
        if isinstance(node, Chars):
            return pick_char(node, self.variant)
        if isinstance(node, Ref):
            return read(node.name) if node.name in self.defs else None
        if isinstance(node, Seq):
            parts = [self._of(i, read) for i in node.items]
            if any(p is None for p in parts) or sum(map(len, parts)) > MAX_SENTENCE:
                return None
            return "".join(parts)
        if isinstance(node, Alt):
            options = [s for s in (self._of(a, read) for a in node.alts) if s is not None]
            return min(options, key=len) if options else None
        if isinstance(node, Rep):
            count = node.min + self.boost if node.max is None else min(node.max, node.min + self.boost)
            if count == 0:
                return ""
            body = self._of(node.body, read)
            return None if body is None or len(body) * count > MAX_SENTENCE else body * count
        if isinstance(node, Opaque):
            return node.sample
        return None


MAX_SENTENCE = 100_000  # characters: a longer shortest sentence (`r0: r1 r1`, `r1: r2 r2`, ...) is not built


def _shorter(old: str | None, new: str | None) -> str | None:
    return new if new is not None and (old is None or len(new) < len(old)) else old


def regex_sample(pattern: str, min_len: int = 0, variant: int = 0) -> str | None:
    """A string `pattern` matches (as JSON Schema's unanchored search does), at least
    `min_len` characters long where the pattern allows; None when sgcli cannot build one."""
    try:
        node = parse_regex(pattern).node
    except ParseError:
        return None
    for boost in range(0, max(min_len, 0) + 2):
        s = ShortestStrings({}, boost=boost, variant=variant).of(node)
        if s is None:
            return None
        if len(s) >= min_len and _found(pattern, s):
            return s
    return None


def _found(pattern: str, s: str) -> bool:
    """`pattern` (read as jsonschema's checks read it: `schema_patterns`) finds `s`, or cannot be read to
    say otherwise."""
    try:
        return finds(pattern, s)
    except DialectError:
        return True


_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _piece_table(vocab) -> tuple[dict[bytes, int], int]:
    table = _tables.get(vocab)
    if table is None:
        pieces: dict[bytes, int] = {}
        for i in vocab.ordinary_ids():
            piece = vocab.tokens[i]
            if piece and piece not in pieces:
                pieces[piece] = i
        table = (pieces, max((len(p) for p in pieces), default=1))
        _tables[vocab] = table
    return table


def fewest_tokens(vocab, data: bytes) -> list[int] | None:
    """The fewest ordinary token ids whose bytes are exactly `data`; None if impossible."""
    pieces, longest = _piece_table(vocab)
    n = len(data)
    best: list[int | None] = [0] + [None] * n
    back: list[tuple[int, int] | None] = [None] * (n + 1)
    for i in range(n):
        if best[i] is None:
            continue
        for length in range(1, min(longest, n - i) + 1):
            token = pieces.get(data[i : i + length])
            if token is not None and (best[i + length] is None or best[i] + 1 < best[i + length]):
                best[i + length] = best[i] + 1
                back[i + length] = (i, token)
    if best[n] is None:
        return None
    ids, pos = [], n
    while pos > 0:
        prev, token = back[pos]
        ids.append(token)
        pos = prev
    return ids[::-1]
