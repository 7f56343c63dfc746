"""Where a character of a text that sgcli assembled from several files came from.

A schema split over files is bundled into one text (`schema_bundle`) that every backend, check
and lint rule reads; their positions are in that text. `SourceMap.location` turns such a position
back into the file, line and column the user wrote, so an error inside a referenced file names that
file. The text is a list of pieces: each copied from a file (every character maps to its own place)
or written by sgcli (a rewritten `$ref`, a separator: mapped to the place it stands for).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from sgcli.errors import Location, line_col_to_offset, offset_to_line_col


@dataclass(frozen=True)
class Piece:
    start: int  # offset in the assembled text
    origin: str | None  # the file it came from
    source: str  # that file's text
    source_start: int  # where the piece starts in it
    copied: bool  # False: written by sgcli; every character maps to `source_start`


@dataclass
class SourceMap:
    pieces: list[Piece] = field(default_factory=list)
    _starts: list[int] = field(default_factory=list)
    _line_starts: list[int] | None = None
    text: str = ""

    def copy(self, origin: str | None, source: str, start: int, end: int) -> None:
        """Append `source[start:end]` as it stands in `origin`."""
        if end > start:
            self._add(Piece(len(self.text), origin, source, start, True), source[start:end])

    def write(self, text: str, origin: str | None, source: str, at: int) -> None:
        """Append sgcli's own `text`, standing for offset `at` of `origin`."""
        if text:
            self._add(Piece(len(self.text), origin, source, at, False), text)

    def origins(self) -> list[str]:
        """The files the text came from, in order, each once."""
        return list(dict.fromkeys(p.origin for p in self.pieces if p.origin))

    def _add(self, piece: Piece, text: str) -> None:
        self.pieces.append(piece)
        self._starts.append(piece.start)
        self.text += text
        self._line_starts = None

    def location(self, line: int | None, col: int | None, default_origin: str | None) -> Location:
        """The position (1-based line and column of the assembled text) in the file it came from."""
        if line is None:
            return Location(default_origin, None, None)
        offset = self._offset(line, col or 1)
        piece = self._piece(offset)
        if piece is None:
            return Location(default_origin, line, col)
        source_offset = piece.source_start + (offset - piece.start if piece.copied else 0)
        line2, col2 = offset_to_line_col(piece.source, min(source_offset, len(piece.source)))
        return Location(piece.origin, line2, col2 if col is not None else None)

    def in_text(self, location: Location) -> tuple[int, int] | None:
        """The inverse of `location`: where a position of a file that was copied into the assembled
        text stands in it (1-based line and column); None where that character was not copied."""
        if location.line is None:
            return None
        ends = [*self._starts[1:], len(self.text)]
        for piece, end in zip(self.pieces, ends):
            if not piece.copied or piece.origin != location.path:
                continue
            offset = line_col_to_offset(piece.source, location.line, location.col or 1)
            if piece.source_start <= offset < piece.source_start + end - piece.start:
                return offset_to_line_col(self.text, piece.start + offset - piece.source_start)
        return None

    def _piece(self, offset: int) -> Piece | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        return self.pieces[i] if i >= 0 else None

    def _offset(self, line: int, col: int) -> int:
        if self._line_starts is None:
            starts, at = [0], self.text.find("\n")
            while at >= 0:
                starts.append(at + 1)
                at = self.text.find("\n", at + 1)
            self._line_starts = starts
        line = max(1, min(line, len(self._line_starts)))
        return min(self._line_starts[line - 1] + col - 1, max(len(self.text) - 1, 0))
