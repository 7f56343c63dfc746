"""Is `--backend auto` sound, or at least honest? Every accepted-invalid instance must be named.

For every schema (JSON-Schema-Test-Suite draft2020-12 and sgcli's own conformance cases in
tests/conformance/), `auto` compiles it (llguidance, then xgrammar, then outlines-core) and
every test instance is fed to the chosen backend's matcher. An *invalid* instance the matcher
accepts is acceptable only when sgcli told the user: `lint` (J001/J002/S002 for that backend)
or the record's `weakened` list names keywords whose removal from the schema makes the instance
valid (the violation is one sgcli told the user about). Goal: auto
compiles >= 99% of schemas and no schema has an accepted-invalid instance nobody named.

Compiles against lint's 256-byte vocabulary (what `sgcli lint` uses without --tokenizer).

    .venv/bin/python benchmarks/auto_soundness.py [--suite-only | --own-only] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWN = ROOT / "tests" / "conformance"


def suite_dir() -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from corpus_paths import require

    return require("json-schema-test-suite") / "tests" / "draft2020-12"


def cases(own: bool, suite: bool):
    """(source, description, schema, tests) for every schema."""
    folders = ([OWN] if own else []) + ([suite_dir()] if suite else [])
    for folder in folders:
        if not folder.is_dir():
            raise SystemExit(f"not found: {folder} (set SGCLI_CORPORA for the suite)")
        for path in sorted(folder.glob("*.json")):
            for case in json.loads(path.read_text(encoding="utf-8")):
                yield path.stem, case["description"], case["schema"], case["tests"]


def named_keywords(compiled, spec) -> set[str]:
    """Keywords sgcli names for this backend: lint's J001/J002/S002 and the record's `weakened`."""
    import re

    from sgcli.backends.schema_warnings import weakened_keywords
    from sgcli.lint import Linter, LintOptions

    named = {w["keyword"] for w in weakened_keywords(compiled)}
    for d in Linter(LintOptions(backend=compiled.backend, json_options=spec.json_options)).lint_spec(spec).diagnostics:
        if d.code == "J001":
            named.add(d.message.split("`")[1])
        named.update(p.rsplit("/", 1)[-1] for p in re.findall(r"\(at (/[^)]*)\)", d.message))
    return named


def explained(schema, instance, named: set[str]) -> bool:
    """Whether the named keywords account for the violation: with every one of them removed from
    every subschema, the instance validates (so what the backend let through is what sgcli named)."""
    import copy

    from sgcli.backends.schema_warnings import iter_subschemas
    from sgcli.lint.schema_instances import validator

    relaxed = copy.deepcopy(schema)
    for _, node in list(iter_subschemas(relaxed)):
        for key in named & set(node):
            del node[key]
    try:
        return validator(relaxed).is_valid(instance)
    except Exception:  # a $ref jsonschema cannot resolve: nothing explains it
        return False


def check(own: bool = True, suite: bool = True) -> dict:
    from sgcli.backends import compile_for
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.errors import UserError
    from sgcli.lint.runner import byte_vocab
    from sgcli.lint.schema_checks import accepts

    vocab = byte_vocab()
    report = {"schemas": 0, "compiled": 0, "by_backend": {}, "accepted_invalid_schemas": 0, "unnamed": []}
    report["not_compiled"] = []
    for source, description, schema, tests in cases(own, suite):
        report["schemas"] += 1
        spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), f"{source}: {description}")
        try:
            compiled, _ = compile_for("auto", spec, vocab)
        except UserError as exc:
            report["not_compiled"].append(f"{spec.name}: {exc.message.splitlines()[0][:120]}")
            continue
        report["compiled"] += 1
        report["by_backend"][compiled.backend] = report["by_backend"].get(compiled.backend, 0) + 1
        bad = [
            t
            for t in tests
            if not t["valid"]
            and any(accepts(compiled, json.dumps(t["data"], separators=s)) for s in ((", ", ": "), (",", ":")))
        ]
        if not bad:
            continue
        report["accepted_invalid_schemas"] += 1
        named = named_keywords(compiled, spec)
        for t in bad:
            if not explained(schema, t["data"], named):
                report["unnamed"].append(
                    {"schema": spec.name, "backend": compiled.backend, "test": t["description"], "named": sorted(named)}
                )
                break
    report["compiled_pct"] = round(100 * report["compiled"] / max(report["schemas"], 1), 1)
    report["unnamed_schemas"] = len(report["unnamed"])
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-only", action="store_true")
    parser.add_argument("--own-only", action="store_true")
    args = parser.parse_args()
    report = check(own=not args.suite_only, suite=not args.own_only)
    print(json.dumps(report, indent=1))
    return 0 if report["unnamed_schemas"] == 0 and report["compiled_pct"] >= 99 else 1


if __name__ == "__main__":
    sys.exit(main())
