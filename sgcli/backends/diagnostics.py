"""Turning backends' error and warning text into positioned, user-facing messages."""

from __future__ import annotations

import re

from sgcli.errors import Location, UserError
from sgcli.spec import ConstraintSpec

_LINE_COL = re.compile(r"line (\d+),? col(?:umn)? (\d+)", re.I)
_POSITION = re.compile(r"at position (\d+)", re.I)
_LOG_PREFIX = re.compile(r"^\[[\d:]+\] \S+:\d+: ")  # "[20:38:07] /project/cpp/x.cc:820: "


def strip_log_prefix(message: str) -> str:
    return _LOG_PREFIX.sub("", message.strip())


def grammar_error(backend: str, spec: ConstraintSpec, message: str, *, hint: str | None = None) -> UserError:
    """A compile error with file:line:col pulled out of the backend's own message."""
    text = strip_log_prefix(message)
    line = col = None
    m = _LINE_COL.search(text)
    if m:
        line, col = int(m.group(1)), int(m.group(2))
    else:
        m = _POSITION.search(text)
        if m and "\n" not in spec.text:
            line, col = 1, int(m.group(1))
    return UserError(f"{spec.kind.label} rejected by {backend}: {text}",
                     location=Location(spec.origin, line, col),
                     hint=hint or "fix the grammar at that position")
