"""One lint finding: which rule, where, what, and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.errors import offset_to_line_col
from sgcli.lint.rules import RULES


@dataclass(frozen=True)
class Diagnostic:
    code: str  # "G001"
    message: str
    path: str
    line: int | None = None  # 1-based; None when the finding is about the whole file
    col: int | None = None  # 1-based, in characters
    end_line: int | None = None
    end_col: int | None = None  # exclusive
    hint: str | None = None
    backend: str | None = None  # the backend the finding is about, if any
    severity: str = ""  # filled from the rule when empty
    notes: tuple[str, ...] = field(default=())  # extra facts (e.g. a backend that agrees)

    def __post_init__(self):
        if not self.severity:
            object.__setattr__(self, "severity", RULES[self.code].severity)

    @property
    def name(self) -> str:
        return RULES[self.code].name

    def sort_key(self):
        return (self.path, self.line or 0, self.col or 0, self.code, self.backend or "")

    def with_note(self, note: str) -> Diagnostic:
        return replace(self, notes=self.notes + (note,))

    def as_dict(self) -> dict:
        return {
            "schema_version": RECORD_SCHEMA_VERSION,  # sgcli/records/ Diagnostic
            "code": self.code,
            "rule": self.name,
            "severity": self.severity,
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "message": self.message,
            "hint": self.hint,
            "backend": self.backend,
            "notes": list(self.notes),
        }


def at_offset(
    code: str,
    text: str,
    path: str,
    start: int,
    end: int | None,
    message: str,
    *,
    hint: str | None = None,
    backend: str | None = None,
) -> Diagnostic:
    """A diagnostic spanning character offsets [start, end) of `text`."""
    line, col = offset_to_line_col(text, start)
    end_line = end_col = None
    if end is not None and end > start:
        end_line, end_col = offset_to_line_col(text, end)
    return Diagnostic(code, message, path, line, col, end_line, end_col, hint, backend)


def short(src: str, limit: int = 60) -> str:
    """Source text for a message: on one line, cut to `limit` characters."""
    src = " ".join(src.split())
    return src if len(src) <= limit else src[: limit - 1] + "…"
