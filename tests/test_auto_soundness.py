"""The auto soundness goal on sgcli's own conformance cases (tests/conformance/, no corpora needed):
every invalid instance `auto`'s backend lets through is explained by keywords sgcli named."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from auto_soundness import check  # noqa: E402


def test_own_cases_compile_and_every_accepted_invalid_instance_is_named():
    report = check(own=True, suite=False)
    assert report["schemas"] == report["compiled"] >= 8
    assert report["accepted_invalid_schemas"] >= 4  # xgrammar fallbacks do let invalid instances through...
    assert report["unnamed"] == []  # ...and every one of them is on a keyword sgcli named
