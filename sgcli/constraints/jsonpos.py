"""Positions of JSON values by JSON pointer, so schema errors can say file:line:col.

`json` gives no positions for values; this small scanner walks a document that is
already known to be valid JSON and records where each value starts.
"""

from __future__ import annotations

import json

_decoder = json.JSONDecoder()
_WS = " \t\n\r"


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def value_offsets(text: str) -> dict[str, int]:
    """Map JSON pointer ("" for the root, "/properties/a") -> character offset of that value."""
    out: dict[str, int] = {}

    def skip(i: int) -> int:
        while i < len(text) and text[i] in _WS:
            i += 1
        return i

    def walk(i: int, pointer: str) -> int:
        i = skip(i)
        out[pointer] = i
        ch = text[i]
        if ch == "{":
            i = skip(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                key, i = _decoder.raw_decode(text, skip(i))
                i = skip(i) + 1  # ':'
                i = skip(walk(i, f"{pointer}/{_escape(key)}"))
                if text[i] == "}":
                    return i + 1
                i += 1  # ','
        if ch == "[":
            i = skip(i + 1)
            if text[i] == "]":
                return i + 1
            n = 0
            while True:
                i = skip(walk(i, f"{pointer}/{n}"))
                n += 1
                if text[i] == "]":
                    return i + 1
                i += 1
        _, end = _decoder.raw_decode(text, i)
        return end

    try:
        walk(0, "")
    except (ValueError, IndexError):
        pass  # not valid JSON: positions stay partial
    return out


def pointer_of(path) -> str:
    return "".join("/" + _escape(str(p)) for p in path)


def locate(text: str, path) -> tuple[int, int] | None:
    """1-based (line, col) of the value at `path` (a sequence of keys/indexes), or its nearest parent."""
    from sgcli.errors import offset_to_line_col

    offsets = value_offsets(text)
    parts = list(path)
    while True:
        ptr = pointer_of(parts)
        if ptr in offsets:
            return offset_to_line_col(text, offsets[ptr])
        if not parts:
            return None
        parts.pop()
