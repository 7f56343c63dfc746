"""One finding per mistake: a backend's error or warning that says what one of sgcli's own findings says
at the same place is folded into it as a note, then everything is sorted."""

from __future__ import annotations

import re

from sgcli.lint.diagnostic import Diagnostic
from sgcli.lint.select import Selection


def finish(found: list[Diagnostic], sel: Selection) -> list[Diagnostic]:
    """Keep the enabled rules; fold a backend's error or warning into sgcli's own finding at
    the same place (one finding, with the backend's agreement as a note); sort."""
    kept = [d for d in found if d.code in sel]
    merged: list[Diagnostic] = []
    # S last, J001 after J004: the findings that absorb others come first
    for d in sorted(kept, key=lambda d: (d.code[0] == "S", d.code == "J001", d.sort_key())):
        target = _absorber(merged, d)
        if target is None:
            merged.append(d)
        else:
            i = merged.index(target)
            if d.code == "J001":  # the probe's evidence on the backend's own matcher
                note = "J001: " + d.message.split(": ", 1)[-1]
            else:
                note = f"{d.backend} says: {d.message.split(': ', 1)[-1]}"
            if target.message not in note:  # a backend that reads the file through sgcli's reader says nothing new
                target = target.with_note(note)
            merged[i] = target
    return sorted(merged, key=Diagnostic.sort_key)


def _absorber(merged: list[Diagnostic], d: Diagnostic) -> Diagnostic | None:
    """The finding that already says what `d` (a backend's error or warning) says: at the
    same line:col, or, for an error without a position, about the same rule name."""
    if d.code not in ("S001", "S002", "J001"):
        return None
    for other in merged:
        if (  # the keyword the checker takes over (J004) or nothing enforces (J005) is what the backend warned about
            other.code in ("J004", "J005")
            and d.code in ("S002", "J001")
            and other.backend == d.backend
            and d.line is not None
            and (other.line, other.col) == (d.line, d.col)
        ):
            return other
        if d.code == "S001" and other.code[0] == "G" and other.severity == "error":
            if d.line is not None and (other.line, other.col) == (d.line, d.col):
                return other
            if any(  # about the same name, wherever the backend placed it (llguidance: the rule's body)
                re.search(rf"['\"`]{re.escape(name)}['\"`]", d.message)
                for name in re.findall(r"`([^`]+)`", other.message)
            ):
                return other
        if (
            d.code == "S002"
            and other.code == "J001"
            and other.backend == d.backend
            and d.line is not None
            and (other.line, other.col) == (d.line, d.col)
        ):
            return other
    return None
