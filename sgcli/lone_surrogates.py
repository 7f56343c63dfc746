"""Lone surrogates (half a UTF-16 pair) in text: Python holds one where a JSON escape such as
`"\\ud800"` or argv's `surrogateescape` made it, and no tokenizer, grammar library, server or output
file takes it. Below every layer that reads input, so each refuses them with the same words."""

from __future__ import annotations


def lone_surrogate(text: str) -> int | None:
    """Index of the first lone surrogate in `text`, else None. Python holds one where bytes that are not
    UTF-8 came in by `surrogateescape` (argv) or JSON escaped half a pair (`"\\ud800"`): no tokenizer,
    server or output file takes it."""
    if text.isascii():
        return None
    return next((i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff"), None)


LONE_SURROGATE = "lone surrogate: not UTF-8 text"
HALF_PAIR_HINT = "write the character itself, or its code point (\\U0001F600 for 😀)"


def half_pair(written: str) -> str:
    """Why a grammar's escape `written` (`\\ud800`) that spells a lone surrogate is refused: xgrammar wrote
    its three bytes, which are no UTF-8 text, and llguidance and Rust's regex refuse it."""
    return f"{written} is half of a UTF-16 surrogate pair, which no UTF-8 text holds"


LONE_SURROGATE_HINT = "escape the whole character (a surrogate pair, e.g. \\ud83d\\ude00) or write it as it is"


def lone_surrogate_in(value) -> str | None:
    """The first lone surrogate in any string (or key) of a parsed JSON or YAML value, else None: an escape
    such as `"\\ud800"` parses, but no tokenizer, grammar library, server or output file takes it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and (at := lone_surrogate(item)) is not None:
            return item[at]
    return None
