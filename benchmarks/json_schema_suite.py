"""How faithfully each backend enforces JSON Schema: the official test suite, instance by instance.

Every schema of JSON-Schema-Test-Suite draft2020-12 is compiled with every grammar
backend (SmolLM2 tokenizer); every test instance is fed to a fresh matcher as
`json.dumps(data)`, in its compact form and with raw (unescaped) non-ASCII, token by
token. A backend accepts the instance when some form is accepted to the end and the
grammar may stop there.
Compared with the instance's `valid` flag this gives, per backend and keyword (file):

  accepted_invalid  the backend's grammar let through an instance the schema forbids
  accepted_invalid_silent   ... and compiled that schema without any warning
  accepted_invalid_unnamed  ... on a schema where sgcli names no keyword the grammar leaves unenforced
  accepted_invalid_checked  ... and sgcli's matcher (grammar + schema checker, what generate
                    decodes with) let it through too: unsound
  rejected_valid    the backend refused an instance the schema allows (incomplete)
  rejected_valid_checked    sgcli's matcher refused an instance the schema allows (schemas generate
                    refuses for a keyword nothing enforces are counted in neither _checked count)
  compile_errors    schemas the backend would not compile (a positioned exit 2 in sgcli)

For llguidance, instances where sgcli's result differs from llguidance's own expected
results (shared/corpora/llguidance/json_schema_test_suite) are listed: a difference
there would be the adapter's fault, not the library's.

    .venv/bin/python benchmarks/json_schema_suite.py            # writes benchmarks/results/json_schema_suite.json
    # compare with the committed summary; exit 1 on regression:
    .venv/bin/python benchmarks/json_schema_suite.py --check
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import corpus_paths

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "json_schema_suite.json"
BACKENDS = ("llguidance", "xgrammar", "outlines_core")
COUNTS = (
    "schemas",
    "compile_errors",
    "warned_schemas",
    "instances",
    "not_compiled_instances",
    "accepted_invalid",
    "accepted_invalid_silent",
    "accepted_invalid_unnamed",
    "accepted_invalid_checked",
    "rejected_valid",
    "rejected_valid_checked",
)
# may never rise: the bare grammar's leaks may (a backend compiled lenient drops keywords), if each is named
# and sgcli's matcher takes none of them
GUARDED = (
    "compile_errors",
    "accepted_invalid_silent",
    "accepted_invalid_unnamed",
    "accepted_invalid_checked",
    "rejected_valid_checked",
)


def suite_dir() -> Path:
    return corpus_paths.require("json-schema-test-suite") / "tests" / "draft2020-12"


def upstream_file() -> Path:
    """llguidance's own expected results for the suite."""
    return corpus_paths.require("llguidance") / "json_schema_test_suite" / "expected_json_schema_test_suite.json"


def suite_files(keywords: list[str] | None = None) -> list[Path]:
    files = sorted(suite_dir().glob("*.json"))
    return [f for f in files if keywords is None or f.stem in keywords]


def _accepts(compiled, vocab, text: str) -> bool:
    from sgcli.backends.matching import walk

    return walk(compiled.matcher(), vocab.encode(text)).accepted


def run_file(backend_name: str, path: Path, vocab) -> tuple[dict, list[dict]]:
    """(counts for this keyword, per-instance outcomes) for one backend on one suite file."""
    from sgcli.backends import get_backend
    from sgcli.backends.keyword_coverage import compiled_gaps, unchecked
    from sgcli.backends.schema_checker import with_checker
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.errors import UserError

    backend = get_backend(backend_name)
    counts = dict.fromkeys(COUNTS, 0)
    outcomes = []
    for case in json.loads(path.read_text(encoding="utf-8")):
        counts["schemas"] += 1
        spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(case["schema"]), f"{path.name}: {case['description']}")
        try:
            compiled = backend.compile(spec, vocab)
        except UserError:
            compiled = None
            counts["compile_errors"] += 1
        else:
            counts["warned_schemas"] += bool(compiled.warnings)
            gaps = compiled_gaps(compiled)
            named = bool(gaps)
            # a keyword nothing enforces (a remote $ref) is exit 2 before generation: nothing gets through
            checked = None if unchecked(gaps) else with_checker(compiled)
        for test in case["tests"]:
            counts["instances"] += 1
            if compiled is None:
                counts["not_compiled_instances"] += 1
                result = "compile_error"
            else:
                forms = {
                    json.dumps(test["data"], ensure_ascii=ascii_only, separators=seps)
                    for ascii_only in (True, False)
                    for seps in ((", ", ": "), (",", ":"))
                }
                accepted = any(_accepts(compiled, vocab, form) for form in forms)
                # the checker only narrows the grammar: it matters where the grammar accepts
                through_sgcli = accepted and checked is not None
                through_sgcli = through_sgcli and any(_accepts(checked, vocab, form) for form in forms)
                if accepted and not test["valid"]:
                    counts["accepted_invalid"] += 1
                    counts["accepted_invalid_silent"] += not compiled.warnings
                    counts["accepted_invalid_unnamed"] += not named
                    counts["accepted_invalid_checked"] += through_sgcli
                    result = "accepted_invalid"
                elif not accepted and test["valid"]:
                    counts["rejected_valid"] += 1
                    counts["rejected_valid_checked"] += checked is not None
                    result = "rejected_valid"
                else:
                    counts["rejected_valid_checked"] += test["valid"] and checked is not None and not through_sgcli
                    result = "pass"
            outcomes.append(
                {"case": case["description"], "test": test["description"], "valid": test["valid"], "result": result}
            )
    return counts, outcomes


def _total(per_keyword: dict) -> dict:
    return {k: sum(c[k] for c in per_keyword.values()) for k in COUNTS}


def upstream_differences(keyword: str, outcomes: list[dict]) -> list[dict]:
    """Instances llguidance itself expects to pass but sgcli's llguidance adapter gets wrong."""
    upstream = upstream_file()
    if not upstream.is_file():
        return []
    expected = json.loads(upstream.read_text())["draft2020-12"].get(keyword, {})
    out = []
    for o in outcomes:
        want = expected.get(o["case"], {}).get(o["test"])
        if want == "pass" and o["result"] != "pass":
            out.append({"keyword": keyword, "case": o["case"], "test": o["test"], "sgcli": o["result"]})
    return out


def run(backends=BACKENDS, keywords: list[str] | None = None, progress=None) -> dict:
    from sgcli.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(None)
    vocab = tokenizer.vocab
    summary: dict = {
        "suite": "JSON-Schema-Test-Suite draft2020-12",
        "tokenizer": tokenizer.name,
        "forms": "json.dumps(data) with default and compact separators, with and without ensure_ascii",
        "backends": {},
    }
    for name in backends:
        from sgcli.backends import get_backend

        per_keyword, differences, started = {}, [], time.perf_counter()
        for path in suite_files(keywords):
            t = time.perf_counter()
            counts, outcomes = run_file(name, path, vocab)
            per_keyword[path.stem] = {**counts, "seconds": round(time.perf_counter() - t, 2)}
            if name == "llguidance":
                differences += upstream_differences(path.stem, outcomes)
            if progress:
                progress(f"{name} {path.stem}: {counts}")
        summary["backends"][name] = {
            "version": get_backend(name).version(),
            "seconds": round(time.perf_counter() - started, 1),
            "totals": _total(per_keyword),
            "keywords": per_keyword,
        }
        if name == "llguidance":
            summary["backends"][name]["differs_from_llguidance_expected"] = differences
    return summary


def regressions(current: dict, committed: dict) -> list[str]:
    """Every (backend, keyword, count) that rose above the committed summary."""
    found = []
    for name, result in current["backends"].items():
        base = committed["backends"][name]["keywords"]
        for keyword, counts in result["keywords"].items():
            for key in GUARDED:
                if counts[key] > base[keyword][key]:
                    found.append(f"{name} {keyword}: {key} {base[keyword][key]} -> {counts[key]}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--check", action="store_true", help="compare with the committed summary instead of writing")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    for name in ("json-schema-test-suite", "llguidance"):
        if corpus_paths.missing(name):
            print(corpus_paths.missing(name), file=sys.stderr)
            return 2
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr))
    summary = run(tuple(args.backends.split(",")), progress=progress)
    for name, result in summary["backends"].items():
        print(f"{name:14} {result['seconds']:7.1f}s  {result['totals']}")
    if args.check:
        found = regressions(summary, json.loads(RESULTS.read_text()))
        print("\n".join(found) or "no regressions")
        return 1 if found else 0
    if RESULTS.is_file():  # a run over some backends keeps the others' committed results
        merged = json.loads(RESULTS.read_text())
        merged["backends"].update(summary["backends"])
        summary["backends"] = {name: merged["backends"][name] for name in BACKENDS if name in merged["backends"]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
