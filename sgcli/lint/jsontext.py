"""Where things are inside a JSON Schema file: keys, values, and characters of strings.

`sgcli.constraints.jsonpos` maps JSON pointers to where values start; a lint finding about a
keyword reads better pointing at the key (`"minimum"`), and a regex feature inside a
`pattern` needs the file offset of each character of the decoded string.
"""

from __future__ import annotations

import json

from sgcli.constraints.jsonpos import pointer_of, value_offsets

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class SchemaText:
    def __init__(self, text: str):
        self.text = text
        self.offsets = value_offsets(text)
        self._by_offset = {off: ptr for ptr, off in self.offsets.items()}

    def value_offset(self, path) -> int | None:
        """Offset of the value at `path` (keys/indexes), or of its nearest located parent."""
        parts = list(path)
        while True:
            off = self.offsets.get(pointer_of(parts))
            if off is not None or not parts:
                return off
            parts.pop()

    def key_span(self, path) -> tuple[int, int] | None:
        """Span of the key naming the last element of `path` (the value's span for an array index)."""
        off = self.offsets.get(pointer_of(path))
        if off is None or not path:
            return None if off is None else (off, off + 1)
        key = path[-1]
        if isinstance(key, int):
            return off, off + 1
        quoted = json.dumps(key, ensure_ascii=False)
        start = self.text.rfind(quoted, 0, off)
        return (start, start + len(quoted)) if start >= 0 else (off, off + 1)

    def pointer_at(self, offset: int) -> str | None:
        return self._by_offset.get(offset)

    def string_chars(self, path) -> tuple[str, list[int]] | None:
        """The decoded string at `path` and, per decoded character (plus one past the end),
        its offset in the file."""
        off = self.offsets.get(pointer_of(path))
        if off is None or self.text[off] != '"':
            return None
        out, where, i = [], [], off + 1
        text = self.text
        while text[i] != '"':
            where.append(i)
            if text[i] == "\\":
                esc = text[i + 1]
                if esc == "u":
                    code = int(text[i + 2 : i + 6], 16)
                    i += 6
                    if 0xD800 <= code < 0xDC00 and text.startswith("\\u", i):  # surrogate pair
                        low = int(text[i + 2 : i + 6], 16)
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                    out.append(chr(code))
                else:
                    out.append(_ESCAPES.get(esc, esc))
                    i += 2
            else:
                out.append(text[i])
                i += 1
        where.append(i)
        return "".join(out), where
