"""The guarantee on sgcli's own conformance cases (tests/conformance/, no corpora needed): `auto`'s
bare grammar lets invalid instances through, every one on a keyword sgcli names, and sgcli's own
matcher (grammar + schema checker, what `generate` decodes with) accepts none of them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from auto_soundness import check  # noqa: E402


def test_own_cases_compile_and_no_invalid_instance_gets_through_the_checker(monkeypatch):
    import auto_soundness

    # the hand-written cases only (keyword_positions.json is the benchmark's: minutes here)
    monkeypatch.setattr(
        auto_soundness, "cases", lambda own, suite, real=False, folder=None, draft=None: _hand_written()
    )
    report = check(own=True, suite=False)
    assert report["schemas"] == report["compiled"] >= 30
    assert report["accepted_invalid_bare"] >= 4  # xgrammar fallbacks do let invalid instances through...
    assert report["unnamed"] == []  # ...every one on a keyword sgcli named...
    assert report["accepted_invalid"] == 0 and report["leaks"] == []  # ...and the checker refuses them all
    assert report["rejected_valid"] == report["rejected_valid_bare"]  # without refusing anything valid


def _hand_written():
    import json

    for name in ("keywords", "schema_keywords"):
        path = Path(__file__).resolve().parent / "conformance" / f"{name}.json"
        for case in json.loads(path.read_text(encoding="utf-8")):
            yield name, case["description"], case["schema"], case["tests"]
