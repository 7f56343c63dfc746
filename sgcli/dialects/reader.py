"""A cursor over grammar text that the GBNF and Lark readers share."""

from __future__ import annotations

from typing import NamedTuple

from sgcli.constraints.spec import MAX_DEPTH
from sgcli.dialects.grammar_model import NotReadAsWritten, ParseError
from sgcli.lone_surrogates import HALF_PAIR_HINT, half_pair, lone_surrogate


class Escapes(NamedTuple):
    """What a dialect reads after a backslash: `table` maps each escape to the character it stands for, or to
    how many hex digits follow it. Any other is refused where it stands (NotReadAsWritten): sgcli had read `\\q`
    as `q`, which llama.cpp, xgrammar and llguidance refuse, and `\\x4`, where llama.cpp wants two digits."""

    engines: str  # the engines whose escapes the table joins: each refuses one outside it
    exact: str  # the engine that wants exactly that many hex digits
    table: dict[str, str | int]


GBNF_ESCAPES = Escapes(  # llama.cpp's parse_char, and what xgrammar's EBNF adds (\f \v \0 \a \b \e \' \? \/)
    "llama.cpp and xgrammar",
    "llama.cpp",
    {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "x": 2, "u": 4, "U": 8}
    | {"f": "\f", "v": "\v", "0": "\0", "a": "\a", "b": "\b", "e": "\x1b", "'": "'", "?": "?", "/": "/"},
)
# inside a GBNF class xgrammar also reads a regex's syntax characters escaped as themselves (`[\\^a]`, `[\\.]`);
# llama.cpp refuses them, llguidance compiles sgcli's print of the class
GBNF_CLASS_ESCAPES = {ch: ch for ch in "^$()*+.{|}"}
LARK_ESCAPES = Escapes(  # a Lark string's: JSON's and \xHH, as llguidance reads them (xgrammar reads JSON's)
    "llguidance and xgrammar",
    "llguidance",
    {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", "\\": "\\", '"': '"', "/": "/", "x": 2, "u": 4},
)


class Reader:
    # GBNF: llama.cpp reads a line break inside a string and sgcli's reader does not (S004, its limitation);
    # Lark: no engine does (llguidance said "lexer error" at the end of the line), so it is refused at the quote
    unclosed_string: type[ParseError] = ParseError

    def __init__(self, text: str, comment_starts: tuple[str, ...], escapes: Escapes):
        self.text = text
        self.pos = 0
        self._comments = comment_starts
        self._escapes = escapes
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
                raise self.unclosed_string("unterminated string literal", start, hint='close it with " on its line')
            ch = self.peek()
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                start = self.pos
                out.append(self.whole(self.escape(), start))
            else:
                out.append(ch)
                self.pos += 1

    def whole(self, ch: str, start: int) -> str:
        """`ch`, read from `start` (an escape), unless it is a lone surrogate (`half_pair`). A class's range
        may end on one: xgrammar's own printed JSON classes do, and `Chars.holds_text` judges the range."""
        if lone_surrogate(ch) is not None:
            raise NotReadAsWritten(half_pair(self.text[start : self.pos]), start, hint=HALF_PAIR_HINT)
        return ch

    def escape(self, more: dict[str, str] | None = None) -> str:
        """Decode the escape after a backslash (the cursor is on the backslash); `more` adds escapes that
        this context reads besides the dialect's own."""
        start = self.pos
        self.pos += 1
        if self.eof():
            raise self.error("a backslash ends the file", start)
        ch = self.text[self.pos]
        self.pos += 1
        meaning = self._escapes.table.get(ch) or (more or {}).get(ch)
        if meaning is None:
            shown = "a backslash before a line break" if ch in "\r\n" else f"unknown escape \\{ch}"
            hint = "write the character itself, \\\\ for a backslash, or \\uHHHH for any character"
            raise NotReadAsWritten(f"{shown}: {self._escapes.engines} refuse it", start, hint=hint)
        if isinstance(meaning, str):
            return meaning
        digits = self.text[self.pos : self.pos + meaning]
        if len(digits) < meaning or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise NotReadAsWritten(
                f"\\{ch} needs {meaning} hex digits: {self._escapes.exact} refuses fewer",
                start,
                hint=f"write all {meaning}: \\{ch}{'0' * (meaning - 1)}9 is U+0009",
            )
        value = int(digits, 16)
        if value > 0x10FFFF:  # chr() raises past Unicode's last code point; backends read it otherwise
            raise NotReadAsWritten(f"\\{ch}{digits} is past U+10FFFF, the last Unicode code point", start)
        self.pos += meaning
        return chr(value)
