"""Guard the committed JSON-Schema-Test-Suite summary (benchmarks/results/json_schema_suite.json).

Recomputes what `benchmarks/json_schema_suite.py` measures and fails when, for any backend
and keyword, accepted-invalid, rejected-valid or compile errors rise above the committed
counts. Improvements pass; rerun the benchmark to commit them.

outlines-core builds a DFA index over the whole vocabulary per schema: ~8 minutes for the
suite on 2 cores, most of it on `type`, `additionalProperties`, `items` and `required`
(unconstrained values become huge regexes). Here it covers the keywords the committed run
finished in under OUTLINES_SECONDS each (the summary records per-keyword seconds); the
benchmark script covers them all.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import corpora
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import json_schema_suite as suite  # noqa: E402

COMMITTED = json.loads(suite.RESULTS.read_text())
OUTLINES_SECONDS = 5.0
OUTLINES_SUBSET = [
    k for k, c in COMMITTED["backends"]["outlines_core"]["keywords"].items() if c["seconds"] < OUTLINES_SECONDS
]


CORPORA = ("json-schema-test-suite", "llguidance")


def _require():
    """Skip (from corpora.require, so pytest names each absent corpus on one summary line) unless present."""
    for name in CORPORA:
        corpora.require(name)


@pytest.fixture(scope="module")
def current():
    """The measurement; None where a corpus is absent (the test skips first, naming it)."""
    if any(corpora.missing(name) for name in CORPORA):
        return None
    results = {"backends": {}}
    for name, keywords in (("llguidance", None), ("xgrammar", None), ("outlines_core", OUTLINES_SUBSET)):
        results["backends"].update(suite.run((name,), keywords)["backends"])
    return results


def test_the_committed_summary_covers_the_whole_suite():
    corpora.require("json-schema-test-suite")
    keywords = {p.stem for p in suite.suite_files()}
    for name in suite.BACKENDS:
        result = COMMITTED["backends"][name]
        assert set(result["keywords"]) == keywords
        totals = result["totals"]
        assert totals["instances"] == 1299 and totals["schemas"] == 383
        assert (
            totals["accepted_invalid"] + totals["rejected_valid"]
            <= totals["instances"] - totals["not_compiled_instances"]
        )


def test_the_outlines_subset_is_most_of_the_suite():
    assert len(OUTLINES_SUBSET) >= 35 and {"const", "enum", "oneOf", "allOf", "ref", "uniqueItems"} <= set(
        OUTLINES_SUBSET
    )


@pytest.mark.slow  # the whole suite through three backends: 27 s (CI's slow stage runs it)
def test_no_keyword_regresses(current):
    _require()
    assert suite.regressions(current, COMMITTED) == []
    for name, result in current["backends"].items():
        for keyword, counts in result["keywords"].items():
            base = COMMITTED["backends"][name]["keywords"][keyword]
            assert (counts["schemas"], counts["instances"]) == (base["schemas"], base["instances"]), (name, keyword)


@pytest.mark.slow  # the whole suite through three backends: 27 s (CI's slow stage runs it)
def test_no_forbidden_instance_gets_through_sgcli_unnamed_or_checked(current):
    """The measurement `--backend auto` stands on: what a grammar lets through is on a keyword sgcli names
    (llguidance, compiled lenient, drops those it does not implement), and its checker refuses it."""
    _require()
    for name, result in current["backends"].items():
        totals = result["totals"]
        assert (totals["accepted_invalid_unnamed"], totals["accepted_invalid_checked"]) == (0, 0), name


@pytest.mark.slow  # the whole suite through three backends: 27 s (CI's slow stage runs it)
def test_outlines_never_weakens_a_schema_in_silence(current):
    """sgcli's outlines adapter warns (with the pointer) about every keyword outlines-core drops."""
    _require()
    assert current["backends"]["outlines_core"]["totals"]["accepted_invalid_silent"] == 0


@pytest.mark.slow  # the whole suite through three backends: 27 s (CI's slow stage runs it)
def test_llguidance_adapter_matches_llguidance_own_expectations(current):
    _require()
    assert current["backends"]["llguidance"]["differs_from_llguidance_expected"] == []
