"""benchmarks/hostile_inputs.py cannot rot: a handful of its own cases run through its own runner,
and its classifier is shown to catch a wrong exit code, a lost and a duplicated record."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import hostile_inputs as hi  # noqa: E402

SMOKE = [
    ("flags", "--temperature nan"),
    ("files", "generate: /dev/zero"),
    ("schemas", "generate: invalid JSON"),
    ("batches", "bad JSON line among good ones"),
    ("outputs", "existing output without --resume/--force"),
    ("servers", "500: one prompt"),
]


def _case(category: str, name: str) -> hi.Case:
    found = [c for c in hi.catalogue() if c.category == category and c.name == name]
    assert len(found) == 1, (category, name)
    return found[0]


def test_the_catalogue_is_well_formed():
    cases = hi.catalogue()
    assert len(cases) >= 120
    assert len({(c.category, c.name) for c in cases}) == len(cases)  # names are unique per category
    assert {c.category for c in cases} >= {"flags", "files", "schemas", "grammars", "templates", "batches",
                                           "outputs", "servers", "disks", "signals"}  # fmt: skip
    for c in cases:
        assert c.run or c.args, c.name  # a command line, or its own steps


@pytest.mark.parametrize(("category", "name"), SMOKE, ids=[n for _, n in SMOKE])
def test_smoke_cases_pass(category, name):
    result = hi.run_case(_case(category, name))
    assert result["ok"], result
    assert all(not r["traceback"] and not r["over"] for r in result["runs"])


def test_the_classifier_catches_a_wrong_code_and_lost_or_duplicated_records(tmp_path):
    wrong = hi.Case("flags", "expects 0 from a bad flag", hi.gen(*hi.SCHEMA, "--top-k", "-1", "x"), 0, server={})
    result = hi.run_case(wrong)
    assert not result["ok"] and result["runs"][0]["wrong"] and result["runs"][0]["exit"] == 2

    # the input holds ids 0..3; the output answers 0 twice, an id it never had, and never 3
    ctx = hi.Ctx(tmp_path)
    ctx.write("o.jsonl", hi._rec(0) + hi._rec(1) + hi._rec(0) + hi._rec(2) + hi._rec(9) + '{"id": 4, "out')
    hi.count_records(ctx, "o.jsonl", [0, 1, 2, 3])
    assert (ctx.lost, ctx.duplicated) == (1, 2)
    assert len(ctx.problems) == 1 and "o.jsonl:6 is not a finished record" in ctx.problems[0]


def test_only_selects_categories_and_refuses_unknown_ones():
    cases = hi.catalogue()
    assert {c.category for c in hi.select(cases, "flags,disks", None, None)} == {"flags", "disks"}
    assert len(hi.select(cases, "servers", "500", 2)) == 2
    with pytest.raises(SystemExit, match="no category"):
        hi.select(cases, "nope", None, None)


def test_counts_add_up():
    results = [
        {"category": "a", "lost": 1, "duplicated": 0, "problems": [],
         "runs": [{"exit": 2, "traceback": False, "wrong": False, "over": False}]},
        {"category": "b", "lost": 0, "duplicated": 2, "problems": ["x"],
         "runs": [{"exit": None, "traceback": False, "wrong": False, "over": True},
                  {"exit": 3, "traceback": True, "wrong": True, "over": False}]},
    ]  # fmt: skip
    table = hi.counts(results)
    assert table["total"]["runs"] == 3 and table["total"]["exit 2"] == 1 and table["total"]["exit 3"] == 1
    assert table["total"]["over 60 s"] == 1 and table["total"]["lost"] == 1 and table["total"]["duplicated"] == 2
    assert table["b"]["failed checks"] == 1 and list(table)[-1] == "total"
