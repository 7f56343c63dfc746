"""No key twice in one JSON object: the guard every generated JSON Schema output gets.

Every backend's grammar lets a key repeat where an object is open to names it does not list
(`{"x8": 1, "x8": 2}` under `patternProperties`, or any object without `additionalProperties:
false`): JSON Schema leaves such a document undefined, and sgcli's check calls it invalid. A tiny
random model wrote one under llguidance (finish `stop`, `valid: false`). Where sgcli's schema checker
runs (`schema_checker`), its reader masks a repeated key; elsewhere this guard does, at a fraction of
the checker's cost: it follows the accepted text's objects and keys byte by byte, and at each mask
looks only at the tokens that can close a key (those with a `"` while a key is open, or two or
three quotes elsewhere), found by table, not by trying each allowed token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from sgcli.backends.base import Compiled, Matcher
from sgcli.backends.on_top import OnTopCompiled, OnTopMatcher
from sgcli.tokenizers.vocab import Vocab

_QUOTE, _BACKSLASH = 0x22, 0x5C

# A state: (frames, string). A frame is ("o", keys, wants_key) or ("a",); string is None, or
# (is_key, raw bytes of a key so far, an escape pending).
_START: tuple = ((), None)


class RepeatedKey(Exception):
    """A token would close a key its object already holds."""


def _step(state: tuple, data: bytes) -> tuple:
    """The state after `data`, or RepeatedKey."""
    frames, string = state
    for b in data:
        if string is not None:
            is_key, raw, escaped = string
            if escaped:
                string = (is_key, raw + bytes([b]) if is_key else raw, False)
            elif b == _BACKSLASH:
                string = (is_key, raw + b"\\" if is_key else raw, True)
            elif b == _QUOTE:
                string = None
                if is_key:
                    frames = _with_key(frames, raw)
            elif is_key:
                string = (True, raw + bytes([b]), False)
        elif b == _QUOTE:
            wants = bool(frames) and frames[-1][0] == "o" and frames[-1][2]
            string = (wants, b"", False)
        elif b == 0x7B:  # {
            frames = frames + (("o", frozenset(), True),)
        elif b == 0x5B:  # [
            frames = frames + (("a",),)
        elif b in (0x7D, 0x5D):  # } ]
            frames = frames[:-1]
        elif b == 0x2C and frames and frames[-1][0] == "o":  # , in an object: a key comes next
            frames = frames[:-1] + (("o", frames[-1][1], True),)
    return frames, string


def _with_key(frames: tuple, raw: bytes) -> tuple:
    key = _name(raw)
    if not frames or frames[-1][0] != "o":
        return frames
    keys = frames[-1][1]
    if key in keys:
        raise RepeatedKey(key)
    return frames[:-1] + (("o", keys | {key}, False),)


def _name(raw: bytes) -> str:
    """The name a key's raw bytes spell (`\\u0061` is `a`), as a JSON reader sees it."""
    if _BACKSLASH not in raw:
        return raw.decode("utf-8", "replace")
    try:
        return json.loads(b'"' + raw + b'"')
    except ValueError:
        return raw.decode("utf-8", "replace")


@dataclass(frozen=True)
class _Tables:
    """Per vocabulary: the ids with at least one, two, three quotes, and for the ids with a quote the
    bytes before their first one (where that holds no backslash), to find the tokens closing a key."""

    one: object  # numpy arrays of ids
    two: object
    three: object
    head: dict[bytes, tuple[int, ...]]


@lru_cache(maxsize=4)
def _tables(vocab: Vocab) -> _Tables:
    import numpy as np

    tokens = vocab.tokens  # quotes per token, counted over all the vocabulary's bytes at once (~5 ms)
    lengths = np.fromiter(map(len, tokens), np.int64, count=len(tokens))
    ends = np.cumsum(lengths)
    quotes = np.concatenate(([0], np.cumsum(np.frombuffer(b"".join(tokens), np.uint8) == _QUOTE)))
    counts = quotes[ends] - quotes[ends - lengths]
    counts[list(vocab.special_ids)] = 0
    head: dict[bytes, list[int]] = {}
    for i in np.flatnonzero(counts >= 1):
        before = vocab.tokens[int(i)].split(b'"', 1)[0]
        if b"\\" not in before:
            head.setdefault(before, []).append(int(i))
    return _Tables(
        np.flatnonzero(counts >= 1),
        np.flatnonzero(counts >= 2),
        np.flatnonzero(counts >= 3),
        {k: tuple(v) for k, v in head.items()},
    )


@dataclass(eq=False)
class KeyGuardCompiled(OnTopCompiled):
    """A compiled JSON Schema grammar whose matchers also refuse a key twice in one object (a key forced
    whole, `^x8$`, can be ruled out only once written: decoding backtracks)."""

    def matcher(self) -> KeyGuardMatcher:
        return KeyGuardMatcher(self.inner.matcher(), self.vocab)


def with_key_guard(compiled: Compiled) -> KeyGuardCompiled:
    return KeyGuardCompiled.around(compiled)


class KeyGuardMatcher(OnTopMatcher):
    """A backend's matcher that also masks the tokens closing a key already in its object."""

    def __init__(self, inner: Matcher, vocab: Vocab):
        super().__init__(inner)
        self._vocab = vocab
        self._tables = _tables(vocab)
        self._state = _START

    def fill_mask(self, bitmask) -> None:
        import numpy as np

        self._inner.fill_mask(bitmask)
        if self._inner.error is not None:
            return
        frames, string = self._state
        tables = self._tables
        words = bitmask.view(np.uint32)
        refused: list[int] = []
        # the tokens that can close a key: with three quotes inside a string (close it, open and close a
        # key), two outside; while a key is open, those closing it at their first quote, by table
        tried = tables.three if string is not None else tables.two
        if string is not None and string[0]:
            keys = frames[-1][1] if frames and frames[-1][0] == "o" else frozenset()
            raw, escaped = string[1], string[2]
            if escaped or b"\\" in raw or any('"' in k or "\\" in k for k in keys):
                tried = tables.one  # an escape in play: the table's spelling may not be the key's
            else:
                for key in keys:
                    spelled = key.encode("utf-8")
                    if spelled.startswith(raw):
                        refused += tables.head.get(spelled[len(raw) :], ())
        if len(tried):
            allowed = tried[(words[tried >> 5] >> (tried & 31).astype(np.uint32)) & 1 == 1]
            for t in allowed:  # tokens that open and close keys within themselves: a few per vocabulary
                try:
                    _step(self._state, self._vocab.tokens[int(t)])
                except RepeatedKey:
                    refused.append(int(t))
        if not refused:
            return
        ids = np.asarray(refused, dtype=np.int64)
        np.bitwise_and.at(words, ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))  # ids may share a word
        if not words.any():
            self._error = "every token the grammar allows here repeats a key of this object"

    def accept(self, token_id: int) -> bool:
        try:
            state = _step(self._state, self._vocab.tokens[token_id])
        except RepeatedKey as exc:
            self._error = f"token {token_id} would repeat the key {exc.args[0]!r} in its object"
            return False
        if not self._inner.accept(token_id):
            return False
        self._history.append(self._state)
        self._state = state
        return True

    def _restore(self, snapshot: tuple) -> None:
        self._state = snapshot

    def can_stop(self) -> bool:
        return self._inner.can_stop()
