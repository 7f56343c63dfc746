"""A cursor over grammar text that the GBNF and Lark readers share."""

from __future__ import annotations

from sgcli.constraints.spec import MAX_DEPTH
from sgcli.dialects.grammar_model import NotReadAsWritten, ParseError

_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "0": "\0", "f": "\f", "v": "\v", "a": "\a", "b": "\b"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


class Reader:
    def __init__(self, text: str, comment_starts: tuple[str, ...]):
        self.text = text
        self.pos = 0
        self._comments = comment_starts
        self.depth = 0  # open groups: every walk of the model recurses per group, so it is bounded
        self.grammar = None  # the Grammar being read, for what a reader records beside the rules

    def open_group(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"groups nested more than {MAX_DEPTH} deep (sgcli's depth limit)", pos)

    def close_group(self) -> None:
        self.depth -= 1

    def eof(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def startswith(self, s: str) -> bool:
        return self.text.startswith(s, self.pos)

    def error(self, message: str, pos: int | None = None) -> ParseError:
        return ParseError(message, self.pos if pos is None else pos)

    def expect(self, s: str, what: str | None = None) -> None:
        if not self.startswith(s):
            found = repr(self.peek()) if not self.eof() else "the end of the file"
            raise self.error(f"expected {what or repr(s)}, found {found}")
        self.pos += len(s)

    def skip_space(self, *, newlines: bool = True) -> None:
        """Skip blanks and comments (and newlines unless `newlines` is False)."""
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.pos += 1
            elif any(text.startswith(c, self.pos) for c in self._comments):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            else:
                break

    def at_line_start(self, pos: int) -> bool:
        """Only blanks stand between the start of the line and `pos`."""
        start = self.text.rfind("\n", 0, pos) + 1
        return self.text[start:pos].strip(" \t\r") == ""

    def string(self) -> str:
        """A double-quoted literal on one line (the cursor is on the opening quote), escapes decoded."""
        start = self.pos
        self.pos += 1
        out = []
        while True:
            if self.eof() or self.peek() == "\n":
                raise self.error("unterminated string literal", start)
            ch = self.peek()
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                out.append(self.escape())
            else:
                out.append(ch)
                self.pos += 1

    def escape(self) -> str:
        """Decode the escape after a backslash (the cursor is on the backslash)."""
        start = self.pos
        self.pos += 1
        if self.eof():
            raise self.error("a backslash ends the file", start)
        ch = self.text[self.pos]
        self.pos += 1
        if ch in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[ch]
        if ch in _HEX_ESCAPES:
            if ch == "u" and self.peek() == "{":  # \u{1F600}
                end = self.text.find("}", self.pos)
                digits, after = (self.text[self.pos + 1 : end], end + 1) if end > 0 else ("", self.pos)
            else:
                digits = self.text[self.pos : self.pos + _HEX_ESCAPES[ch]]
                after = self.pos + _HEX_ESCAPES[ch]
            try:
                value = int(digits, 16)
            except ValueError:
                raise self.error(f"bad \\{ch} escape", start) from None
            if value > 0x10FFFF:  # chr() raises past Unicode's last code point; backends read it otherwise
                message = f"\\{ch}{digits} is past U+10FFFF, the last Unicode code point"
                raise NotReadAsWritten(message, start)
            self.pos = after
            return chr(value)
        return ch
