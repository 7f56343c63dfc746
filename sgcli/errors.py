"""Errors and exit codes, in one place, and the wording helpers messages share.

A `UserError` is the user's to fix (bad file, bad flag, unknown model): the CLI prints
its message, without a traceback, and exits 2. Anything else escaping a command is a
bug in sgcli: the CLI says so and exits 3.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass

EXIT_OK = 0
EXIT_FINDINGS = 1  # some output invalid, lint findings, failing test cases
EXIT_USAGE = 2  # the user's input or flags are wrong
EXIT_INTERNAL = 3  # a bug in sgcli
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it); SIGTERM is 143 (`interrupted_code`)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, raised where the main thread was: ends the run as Ctrl-C does (whole records,
    the lock given back), with the exit code shells give that signal (a script tells `timeout` from ^C)."""

    def __init__(self, signum: int = 2):
        super().__init__()
        self.signum = signum


def interrupted_code(exc: BaseException | None = None, signum: int | None = None) -> int:
    """128 + the signal that ended the run: 130 for Ctrl-C (a bare KeyboardInterrupt), 143 for SIGTERM."""
    if signum is None:
        signum = exc.signum if isinstance(exc, Interrupted) else 2
    return 128 + signum


@dataclass(frozen=True)
class Location:
    """Where in a user's file something is: 1-based line and column, where known."""

    path: str | None = None
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        parts = [self.path or "<input>"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.col is not None:
                parts.append(str(self.col))
        return ":".join(parts)


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """The sentence " Did you mean 'x'?" naming the closest of `choices` to a mistyped `value`, or ""."""
    choices = list(choices)
    folded = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(value.lower(), list(folded), n=1, cutoff=0.6) or _abbreviated(value, folded)
    if not close and len(value) >= 2:  # the start of one name only (xgr: xgrammar)
        starting = [c for c in folded if c.startswith(value.lower())]
        close = starting if len(starting) == 1 else []
    return f" Did you mean '{folded[close[0]]}'?" if close else ""


def _abbreviated(value: str, folded: dict[str, str]) -> list[str]:
    """The one choice `value` abbreviates as its first letter and its number (fp16: float16), else []."""
    number = re.search(r"\d+$", value)
    if not value or number is None:
        return []
    ends = re.compile(rf"\D{number.group()}$")
    found = [c for c in folded if c[:1] == value[:1].lower() and ends.search(c) and c != value.lower()]
    return found if len(found) == 1 else []


def plural(n: int | str, word: str, many: str | None = None) -> str:
    """`1 token`, `2 tokens`: a count whose noun agrees with it (summaries read "1 tokens", "1 items")."""
    return f"{n} {word if n == 1 else many or word + 's'}"


class SgcliError(Exception):
    """Base for errors sgcli raises on purpose."""

    exit_code = EXIT_INTERNAL


class UserError(SgcliError):
    """Bad input: printed as `error: <where>: <message>` plus an optional hint, exit 2."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, location: Location | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint

    def as_json(self) -> dict:
        """Its message, place and hint as JSON: how a forked child hands the error to its parent,
        which raises it again (`from_json`)."""
        where = self.location
        return {
            "message": self.message,
            "location": [where.path, where.line, where.col] if where else None,
            "hint": self.hint,
        }

    @classmethod
    def from_json(cls, fields: dict) -> UserError:
        where = fields.get("location")
        return cls(fields["message"], location=Location(*where) if where else None, hint=fields.get("hint"))

    def one_line(self, location: Location | None = None) -> str:
        """The error as one line, for a record's `errors` or a table cell (`location`: where, if the
        error names no place of its own: the --input line of a request)."""
        where = self.location or location
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} (hint: {self.hint})" if self.hint else text

    def render(self) -> str:
        where = f"{self.location}: " if self.location else ""
        text = f"error: {where}{self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class ConstraintError(UserError):
    """A mistake in the constraint itself, whichever backend reads it (a schema written inside a grammar
    that is not valid JSON Schema, a count past 2**32): `--backend auto` stops at it instead of saying
    it once per backend."""


class UnsupportedError(UserError):
    """A backend was asked for something it cannot do; names who can."""

    def __init__(self, backend: str, what: str, alternatives: list[str]):
        alt = ", ".join(alternatives) if alternatives else "no installed backend"
        super().__init__(
            f"backend '{backend}' does not support {what}",
            hint=f"backends that do: {alt} (choose with --backend)",
        )
        self.backend = backend
        self.what = what
        self.alternatives = alternatives


def line_col_to_offset(text: str, line: int, col: int) -> int:
    """The character offset of 1-based `line`:`col` in `text` (its end past the last line)."""
    at = 0
    for _ in range(line - 1):
        at = text.find("\n", at) + 1
        if at == 0:
            return len(text)
    return at + col - 1


def offset_to_line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset in `text`."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col
