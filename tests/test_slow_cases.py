"""tests/slow_cases.txt names real tests, and conftest marks them: a renamed test would otherwise
quietly move back into `make test` (or the list would name nothing)."""

from __future__ import annotations

import re

from conftest import ROOT, slow_cases


def test_every_listed_case_names_a_test_that_exists():
    listed = slow_cases()
    assert len(listed) > 10
    for node in listed:
        path, name = node.split("::", 1)
        function = name.split("[", 1)[0]
        source = (ROOT / path).read_text(encoding="utf-8")
        assert re.search(rf"^def {re.escape(function)}\(", source, flags=re.M), f"{node}: no such test"


def test_a_listed_case_is_marked_slow_and_others_are_not():
    import conftest

    class Item:
        def __init__(self, nodeid):
            self.nodeid, self.marks = nodeid, []

        def add_marker(self, mark):
            self.marks.append(mark.name)

    listed, other = Item(next(iter(slow_cases()))), Item("tests/test_slow_cases.py::nothing")
    conftest.pytest_collection_modifyitems(None, [listed, other])
    assert listed.marks == ["slow"] and other.marks == []
