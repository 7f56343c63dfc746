"""Counts in messages agree with their noun through one helper, `sgcli.errors.plural`."""

from __future__ import annotations

import re
from pathlib import Path

from sgcli.errors import plural
from sgcli.lint.render import summary

SGCLI = Path(__file__).resolve().parent.parent / "sgcli"
HAND_WRITTEN = re.compile(r"""['"]s['"] if """)


def test_plural_agrees_with_the_count():
    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert plural(3, "more error") == "3 more errors"


def test_lint_summary_reads_one_file_one_error():
    assert summary([], 1) == "All checks passed (1 file)."
    assert summary([], 1, 1).startswith("1 file could not be linted")
    assert summary([], 0, 1) == "1 file could not be linted (see the errors above)."  # not "in the other 0"


def test_no_module_writes_its_own_plural():
    """Each hand-written `'s' if n != 1` was a second copy of plural() (and some read `> 1`)."""
    found = [
        f"{path.relative_to(SGCLI)}:{n}"
        for path in sorted(SGCLI.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if HAND_WRITTEN.search(line)
    ]
    assert not found, f"use sgcli.errors.plural: {found}"
