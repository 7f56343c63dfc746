"""sgcli's own conformance cases (tests/conformance/): core checks that need nothing beside the checkout.

The expected verdicts are first checked by the independent validators (jsonschema, Python's
re, lark), so the cases themselves are right; then the backends are held to them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sgcli.constraints.spec import ConstraintSpec, Kind

HERE = Path(__file__).resolve().parent / "conformance"
# Suite format ({description, schema, tests}) plus the keyword each case is about; the auto soundness
# benchmark (benchmarks/auto_soundness.py) reads every *.json file here too.
KEYWORD_CASES = json.loads((HERE / "schema_keywords.json").read_text())
GRAMMARS = json.loads((HERE / "grammars" / "cases.json").read_text())["cases"]


def _schema_cases():
    seen: dict[str, int] = {}
    for case in KEYWORD_CASES:
        keyword = case["keyword"]
        seen[keyword] = seen.get(keyword, -1) + 1
        yield pytest.param(keyword, case, id=f"{keyword}-{seen[keyword]}")


SCHEMA_CASES = list(_schema_cases())


def schema_spec(keyword: str, case: dict) -> ConstraintSpec:
    return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(case["schema"], indent=2), f"{keyword}.json")


@pytest.mark.parametrize(("keyword", "case"), SCHEMA_CASES)
def test_jsonschema_agrees_with_every_expected_verdict(keyword, case):
    import jsonschema

    validator = jsonschema.Draft202012Validator(case["schema"])
    assert case["tests"] and {t["valid"] for t in case["tests"]} == {True, False}
    for t in case["tests"]:
        assert validator.is_valid(t["data"]) == t["valid"], (keyword, t)


@pytest.mark.parametrize(("keyword", "case"), SCHEMA_CASES)
def test_llguidance_never_accepts_an_invalid_instance(keyword, case):
    """What llguidance's grammar does not drop it enforces, and what it drops (compiled lenient: the
    keywords it does not implement) is a named gap that sgcli's matcher enforces: the reason `auto` puts
    it first."""
    from sgcli.backends import compile_for
    from sgcli.backends.keyword_coverage import compiled_gaps
    from sgcli.backends.matching import feed
    from sgcli.lint.runner import byte_vocab

    spec, vocab = schema_spec(keyword, case).for_generation(), byte_vocab()  # a dry run also checks `properties`
    compiled = compile_for("llguidance", spec, vocab)[0]
    dropped = {g.keyword for g in compiled_gaps(compiled)}
    assert dropped <= {"uniqueItems"}, dropped  # the one keyword here it does not implement
    for t in case["tests"]:
        text = json.dumps(t["data"])
        accepted = feed(compiled, vocab.encode(text)).accepted
        if not t["valid"]:
            assert not accepted, (keyword, text)
        elif isinstance(t["data"], type(case["tests"][0]["data"])):
            assert accepted, (keyword, text)  # a valid instance of the schema's own type is never refused


@pytest.mark.parametrize("group", [0, 1], ids=["minimum 1.1", "minimum -2"])
def test_minimum_not_enforced_agrees_with_each_matcher(group):
    """J001 `minimum` for a backend exactly when its actual matcher accepts an invalid instance."""
    from sgcli.backends import check_supports
    from sgcli.backends.matching import backends_for, feed
    from sgcli.errors import UserError
    from sgcli.lint import Linter, LintOptions
    from sgcli.lint.runner import byte_vocab

    case = [c for c in KEYWORD_CASES if c["keyword"] == "minimum"][group]
    spec, vocab = schema_spec(f"minimum-{group}", case), byte_vocab()
    accepts_invalid = set()
    for name in backends_for(spec):
        try:
            compiled = check_supports(name, spec).compile(spec, vocab)
        except UserError:
            continue
        invalid = [t["data"] for t in case["tests"] if not t["valid"]]
        if any(feed(compiled, vocab.encode(json.dumps(x))).accepted for x in invalid):
            accepts_invalid.add(name)
    found = Linter(LintOptions()).lint_spec(spec).diagnostics
    reported = {d.backend for d in found if d.code == "J001" and d.message.startswith("`minimum`")}
    assert reported == accepts_invalid


@pytest.mark.parametrize("case", GRAMMARS, ids=lambda c: c["name"])
def test_every_backend_for_a_grammar_accepts_and_rejects_as_expected(case):
    from sgcli.backends import check_supports
    from sgcli.backends.matching import backends_for, feed
    from sgcli.lint.runner import byte_vocab

    spec, vocab = ConstraintSpec(Kind(case["kind"]), case["text"], case["name"]), byte_vocab()
    if spec.kind is Kind.REGEX:  # the independent check of the cases themselves
        for s in case["accept"] + case["reject"]:
            assert (re.fullmatch(case["text"], s) is not None) == (s in case["accept"]), s
    names = backends_for(spec)
    assert names, case["name"]
    for name in names:
        compiled = check_supports(name, spec).compile(spec, vocab)
        for s in case["accept"]:
            assert feed(compiled, vocab.encode(s)).accepted, (name, s)
        for s in case["reject"]:
            assert not feed(compiled, vocab.encode(s)).accepted, (name, s)
