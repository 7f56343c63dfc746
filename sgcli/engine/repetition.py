"""The repetition guard (issue 29): an output stuck repeating one span ends early.

An output whose text ends in one span repeated back to back is stuck (`john_john_john_...` inside a
string, newline after newline in flexible JSON, a key and its value over and over) and ends early,
finish_reason "repetition", instead of running to --max-tokens. It reads characters, not token ids,
so a loop spelled by different tokens each time ("\n", "\n\n", ...) is still one loop. It runs after
every token the model chose (`sgcli.engine.sequence`), so its cost per call must stay tiny.
"""

from __future__ import annotations

from dataclasses import dataclass

# The guard fires where the output ends in a span of at most REPEAT_MAX_SPAN characters repeated at least
# REPEAT_MIN_COPIES times back to back, the copies covering at least REPEAT_MIN_CHARS characters:
REPEAT_MAX_SPAN = 32  # a value, a key, a short phrase
REPEAT_MIN_COPIES = 8  # `[0, 0, 0]`, a doubled letter or a few equal items in a row stay far below it
REPEAT_MIN_CHARS = 64  # the run lint W002 calls runaway whitespace (64 spaces); `"aaaa"` is nowhere near
# or in a longer span, up to REPEAT_LONG_SPAN characters (a key and its value, `"description":"Paris
# is a city known...",` of 84), in whole copies, at least REPEAT_LONG_MIN_COPIES of them and at least
# REPEAT_LONG_MIN_CHARS characters: a span of 33 needs 8 copies (264), one of 84 needs 4. SmolLM2-135M
# looped on spans of 33, 51 and 84 characters to --max-tokens (2026-12-06); three equal 64-character
# objects in a row, or equal keys in objects whose values differ, stay below it.
REPEAT_LONG_SPAN = 128
REPEAT_LONG_MIN_COPIES = 4
REPEAT_LONG_MIN_CHARS = 256
_PROBE = 8  # the last characters whose earlier occurrences name the long spans worth comparing


@dataclass(frozen=True)
class Repetition:
    """Where an output began repeating `span` back to back, and how many copies it holds."""

    start: int  # character offset in the output
    span: str
    copies: int

    def message(self) -> str:
        return (
            f"repetition guard: the output repeats {self.span!r} {self.copies} times from character {self.start} "
            "(ended early; --no-repetition-guard turns the guard off)"
        )


def find_repetition(text: str) -> Repetition | None:
    """The repetition `text` ends in, by the guard's constants (the shortest span that repeats),
    or None. Each short span length costs one character compare unless the text's end repeats at it."""
    n = len(text)
    for length in range(1, REPEAT_MAX_SPAN + 1):
        tail = max(REPEAT_MIN_CHARS, REPEAT_MIN_COPIES * length)
        if tail > n:
            return None  # longer spans need longer tails still
        if text[n - 1] == text[n - 1 - length] and _repeats(text, length, tail):
            return _repetition(text, length, tail)
    return _long_repetition(text)


def _long_repetition(text: str) -> Repetition | None:
    """A span of REPEAT_MAX_SPAN+1 to REPEAT_LONG_SPAN characters. Only the lengths at which the last
    _PROBE characters occur again are compared, found by str.rfind (in C) rather than a loop over all
    96 lengths: the cost per token stays that of the short spans'."""
    n = len(text)
    if n < REPEAT_LONG_MIN_CHARS:
        return None
    probe, lowest = text[n - _PROBE :], max(0, n - _PROBE - REPEAT_LONG_SPAN)
    at = text.rfind(probe, lowest, n - REPEAT_MAX_SPAN - 1)
    while at >= 0:  # rightmost first: the shortest span first
        length = n - _PROBE - at
        tail = length * max(REPEAT_LONG_MIN_COPIES, -(-REPEAT_LONG_MIN_CHARS // length))
        if tail <= n and _repeats(text, length, tail):
            return _repetition(text, length, tail)
        at = text.rfind(probe, lowest, at + _PROBE - 1)
    return None


def _repeats(text: str, length: int, tail: int) -> bool:
    """Whether the last `tail` characters of `text` repeat with period `length`."""
    n = len(text)
    return text[n - tail + length :] == text[n - tail : n - length]


def _repetition(text: str, length: int, tail: int) -> Repetition:
    """The repetition of period `length` that covers the last `tail` characters, from where it began."""
    start = len(text) - tail
    while start > 0 and text[start - 1] == text[start - 1 + length]:
        start -= 1
    return Repetition(start, text[start : start + length], (len(text) - start) // length)
