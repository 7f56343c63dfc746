"""JSON pointers and where things are in a JSON file, so schema errors can say file:line:col.

`json` gives no positions for values; this small scanner walks a document that is
already known to be valid JSON and records where each value starts. `SchemaText` adds
what lint needs on top: the span of a keyword's key (a finding about `"minimum"` reads
better there) and the file offset of each character of a decoded string (a regex
feature inside a `pattern`). JSON pointers are decoded in one place, `pointer_parts`.
"""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from sgcli.errors import offset_to_line_col

_decoder = json.JSONDecoder()
_WS = " \t\n\r"
_WS_RUN = re.compile(r"[ \t\n\r]*")


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


def pointer_parts(pointer: str) -> list[str]:
    """RFC 6901: "/a~1b/0" -> ["a/b", "0"]; "" (the whole document) -> []."""
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]


def resolve_ref(doc, ref: str) -> tuple[object, tuple] | None:
    """(value, path) that a local `$ref` ("#/$defs/a", "#") names in `doc`, list indexes as ints in
    the path; None for a remote ref, an anchor ("#name") or a pointer to nothing."""
    fragment = unquote(ref[1:]) if ref.startswith("#") else None
    if fragment is None or (fragment and not fragment.startswith("/")):
        return None
    node, path = doc, ()
    for part in pointer_parts(fragment):
        if isinstance(node, dict) and part in node:
            node, path = node[part], path + (part,)
        elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
            node, path = node[int(part)], path + (int(part),)
        else:
            return None
    return node, path


def locate(text: str, path) -> tuple[int, int] | None:
    """1-based (line, col) of the value at `path` (a sequence of keys/indexes), or its nearest parent.

    One pass down the path; the values beside it are skipped whole by json's C scanner, so a compile
    error's position costs microseconds, not a walk of the document. As in `value_offsets`, a key
    given twice means its last occurrence (the value `json.loads` keeps)."""
    found = None
    try:
        i = _ws_end(text, 0)
        found = i
        for part in path:
            token = str(part)
            i = _member(text, i, token) if text[i] == "{" else _element(text, i, token) if text[i] == "[" else None
            if i is None:
                break
            found = i
    except (ValueError, IndexError):
        pass  # not valid JSON: the deepest value reached
    return None if found is None else offset_to_line_col(text, found)


def _ws_end(text: str, i: int) -> int:
    return _WS_RUN.match(text, i).end() if text[i] in _WS else i


def _scan(text: str, i: int) -> tuple[object, int]:
    """(value, end) of the JSON value at `i`: json's C scanner without `raw_decode`'s wrapper."""
    try:
        return _decoder.scan_once(text, i)
    except StopIteration:
        raise ValueError(f"no JSON value at {i}") from None


def value_end(text: str, i: int) -> int:
    """The offset just past the JSON value that starts at `i` (a valid document's value offset)."""
    return _scan(text, i)[1]


def _member(text: str, i: int, token: str) -> int | None:
    """Offset of the value of the last member named `token` of the object at `i`."""
    hit = None
    i = _ws_end(text, i + 1)
    if text[i] == "}":
        return None
    while True:
        key, i = _scan(text, i)
        i = _ws_end(text, _ws_end(text, i) + 1)  # past ':'
        if key == token:
            hit = i
        i = _ws_end(text, _scan(text, i)[1])
        if text[i] == "}":
            return hit
        i = _ws_end(text, i + 1)  # past ','


def _element(text: str, i: int, token: str) -> int | None:
    """Offset of element `token` (a canonical decimal index) of the array at `i`."""
    if not (token.isascii() and token.isdigit()) or str(int(token)) != token:
        return None
    want, n = int(token), 0
    i = _ws_end(text, i + 1)
    if text[i] == "]":
        return None
    while n < want:
        i = _ws_end(text, _scan(text, i)[1])
        if text[i] == "]":
            return None
        i = _ws_end(text, i + 1)  # past ','
        n += 1
    return i


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class SchemaText:
    """A JSON file's text with the offset of every value, by pointer and back."""

    def __init__(self, text: str):
        self.text = text
        self.offsets = value_offsets(text)
        self._by_offset = {off: ptr for ptr, off in self.offsets.items()}

    def path_of(self, pointer: str) -> tuple:
        """`pointer` as a path of keys and list indexes (ints where the container is an array)."""
        path: list = []
        for token in pointer_parts(pointer):
            container = self.offsets.get(pointer_of(path))
            in_list = container is not None and self.text[container] == "["
            path.append(int(token) if in_list and token.isascii() and token.isdigit() else token)
        return tuple(path)

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


def key_position(text: str, pointer: str) -> tuple[int, int] | None:
    """1-based (line, col) of the key naming the value at `pointer` in the JSON `text` (the value itself
    for the root or an array element): where a finding about a schema keyword reads best."""
    stext = SchemaText(text)
    span = stext.key_span(stext.path_of(pointer))
    return None if span is None else offset_to_line_col(text, span[0])
